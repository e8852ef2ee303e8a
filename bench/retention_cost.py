"""What keeping one cached answer for readers' verdicts costs, measured in CPU time rather than requests a second,
so that it can be measured on a machine others share (issue 48).

    .venv/bin/python -m bench.retention_cost [-n 2000] [--rounds 7] [--batch 700] [--json]

Real cached answers: two chapters of our corpus are ingested into a throwaway schema, a question answered once
and then served `n` times from the answer cache through the pipeline. Then, in interleaved rounds:

- **Python**: process CPU per response of `keep()` and the encoding into rows (what the response log's task
  does between writes), each hit's body encoded and hashed on its own ("per hit", as before) against once per
  cache entry ("per entry");
- **Postgres**: the CPU the backend that writes the rows spends per row (its utime + stime from /proc, so what
  other processes do to the machine counts only through the caches), in batches of `--batch` rows, what a
  20 ms encode interval and a FEEDBACK_FLUSH_MS write hold at ~1,400 cached answers a second, and this
  process's CPU for the same writes (asyncpg encoding the arrays);
- with `--collections`, the collector's full collections while cached answers are served through the
  pipeline, kept as /ask keeps them against not kept.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import os
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import msgspec

from bench.common import scratch_store
from provenance.feedback.responses import ResponseLog, served_settings
from provenance.ingest.folder import ingest
from provenance.services import build_services, load_embedder
from provenance.settings import REPO_ROOT, Settings, load_settings
from provenance.store.feedback import FeedbackStore, KeptResponse
from provenance.store.pool import create_pool, resolve_database_url
from provenance.wire import AskResponse

QUESTION = "How much does a standard locker cost per month?"
CHAPTERS = ("02-hours-and-access.md", "05-storage-and-lockers.md")
_TICK_S = 1 / os.sysconf("SC_CLK_TCK")


def _cpu_of(pid: int) -> float:
    """A process's CPU seconds so far (user + system), read from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) * _TICK_S


async def measure(n: int, rounds: int, batch: int, pg_batches: int, gc_too: bool) -> dict[str, Any]:
    folder = Path(tempfile.mkdtemp(prefix="bench-retention-"))
    for name in CHAPTERS:
        shutil.copy(REPO_ROOT / "corpus" / name, folder / name)
    base = load_settings().with_overrides(rate_limit_per_hour=0, log_level="warning")
    try:
        async with scratch_store(base) as (store, settings):
            embedder = load_embedder(settings)
            await ingest(store, folder, lambda: embedder, settings.embedding.model)
            services = await build_services(settings)
            try:
                hits = await _served(services.pipeline, n)
                collections = await _collections(services.pipeline, store, settings, n, rounds) if gc_too else {}
            finally:
                await services.close()
            python, rows = await _python_cost(hits, store, settings, rounds)
            pg = await _postgres_cost(rows, settings, rounds, batch, pg_batches)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return {
        "n": n,
        "rounds": rounds,
        "batch": batch,
        "body_bytes": len(rows[0].body_json),
        "envelope_bytes": statistics.median(len(row.envelope_json) for row in rows),
        **python,
        **pg,
        **collections,
    }


async def _served(pipeline: Any, n: int) -> list[tuple[AskResponse, str | None]]:
    """A question answered once, then `n` times from the answer cache, each with the entry it came from."""
    await pipeline.ask(QUESTION, request_id="bench-first", peer_ip="127.0.0.1", headers={})
    hits = []
    for i in range(n):
        outcome = await pipeline.ask(QUESTION, request_id=f"bench-hit-{i:06d}", peer_ip="127.0.0.1", headers={})
        if not outcome.response.cached:
            raise RuntimeError(f"not served from the cache: {outcome.response.stages.cache}")
        hits.append((outcome.response, outcome.served_from))
    return hits


async def _collections(pipeline: Any, store: Any, settings: Settings, n: int, rounds: int) -> dict[str, list[float]]:
    """The collector's work while `n` cached answers are served through the pipeline, each kept as /ask keeps it
    ("on") or not ("off"), the log's own task encoding and writing meanwhile: full (generation 2) collections
    per 1,000 answers and their pauses. A response held by the log past its request outlives the young
    generations' collections, and what is promoted brings the next full collection, which walks the heap."""
    cost: dict[str, list[float]] = {f"gc_{k}_{v}": [] for k in ("full_per_1k", "full_ms_per_1k") for v in ("on", "off")}
    started: list[float] = []
    full: list[float] = []

    def watch(phase: str, info: dict[str, int]) -> None:
        if phase == "start":
            started.append(time.perf_counter())
        elif info["generation"] == 2:
            full.append(time.perf_counter() - started[-1])

    gc.callbacks.append(watch)
    try:
        for r in range(rounds):
            for name in ("on", "off") if r % 2 == 0 else ("off", "on"):
                log = ResponseLog(store, settings, served_settings(settings, "local"))
                gc.collect()
                gc.freeze()  # as the app's start-up does (provenance.app): a full collection walks what came since
                full.clear()
                for i in range(n):
                    outcome = await pipeline.ask(QUESTION, request_id=f"gc-{r}-{name}-{i}", peer_ip="127.0.0.1")
                    if name == "on":
                        log.keep(outcome.response, outcome.served_from)
                await log.aclose()
                cost[f"gc_full_per_1k_{name}"].append(len(full) / n * 1000)
                cost[f"gc_full_ms_per_1k_{name}"].append(sum(full) / n * 1e6)
    finally:
        gc.callbacks.remove(watch)
    return cost


async def _python_cost(
    hits: list[tuple[AskResponse, str | None]], store: Any, settings: Settings, rounds: int
) -> tuple[dict[str, list[float]], list[KeptResponse]]:
    """CPU per response of keep() and the encoding into rows, a fresh log each round, each body encoded per
    hit against once per cache entry."""
    cost: dict[str, list[float]] = {"python_us_per_hit": [], "python_us_per_entry": []}
    rows: list[KeptResponse] = []
    unwritten = settings.with_overrides(feedback_flush_ms=60_000)  # no write within a round's timing
    for r in range(rounds):
        for name in ("per_hit", "per_entry") if r % 2 == 0 else ("per_entry", "per_hit"):
            log = ResponseLog(store, unwritten, served_settings(settings, "local"))
            started = time.process_time()
            for response, served_from in hits:
                log.keep(response, served_from if name == "per_entry" else None)
            await log._encode()
            cost[f"python_us_{name}"].append((time.process_time() - started) / len(hits) * 1e6)
            rows, log._batch.rows[:] = list(log._batch.rows), []
            await log.aclose()
    return cost, rows


async def _postgres_cost(
    rows: list[KeptResponse], settings: Settings, rounds: int, batch: int, copies: int
) -> dict[str, list[float]]:
    """The writing backend's CPU per row, and the write's wall time, `copies` times the rows a round."""
    one = settings.with_overrides(db_pool_min=1, db_pool_max=1)
    pool = await create_pool(resolve_database_url(one), one)
    cost: dict[str, list[float]] = {
        "pg_cpu_us_per_row": [],
        "pg_wall_us_per_row": [],
        "pg_client_us_per_row": [],
        "loop_held_ms": [],
    }
    held: list[float] = []

    async def ticker() -> None:
        """The CPU the loop spent between two turns of this task: the longest is what a write holds every
        request for. CPU rather than wall time, so that the scheduler's pauses on shared cores don't count."""
        last = time.thread_time()
        while True:
            await asyncio.sleep(0)
            now = time.thread_time()
            held.append(now - last)
            last = now

    try:
        writer = FeedbackStore(pool)
        pid = await pool.fetchval("SELECT pg_backend_pid()")
        for r in range(rounds):
            fresh = [
                msgspec.structs.replace(row, request_id=f"pg-{r}-{c}-{i}")
                for c in range(copies)
                for i, row in enumerate(rows)
            ]
            cpu, wall, client = _cpu_of(pid), time.perf_counter(), time.process_time()
            for start in range(0, len(fresh), batch):
                await writer.keep_responses(fresh[start : start + batch])
            cost["pg_client_us_per_row"].append((time.process_time() - client) / len(fresh) * 1e6)
            cost["pg_cpu_us_per_row"].append((_cpu_of(pid) - cpu) / len(fresh) * 1e6)
            cost["pg_wall_us_per_row"].append((time.perf_counter() - wall) / len(fresh) * 1e6)
            # One more batch, watched (the watcher's own CPU kept out of the figures above).
            watch = asyncio.get_running_loop().create_task(ticker())
            await asyncio.sleep(0)
            held.clear()
            await writer.keep_responses(
                [msgspec.structs.replace(row, request_id=f"held-{r}-{row.request_id}") for row in fresh[:batch]]
            )
            watch.cancel()
            cost["loop_held_ms"].append(max(held) * 1000)
    finally:
        await pool.close()
    return cost


def _spread(values: list[float], unit: str = " µs") -> str:
    return f"{statistics.median(values):.1f}{unit} (min {min(values):.1f}, max {max(values):.1f})"


def report(result: dict[str, Any]) -> str:
    return "\n".join(
        [
            f"{result['n']:,} cached answers of one entry, {result['rounds']} interleaved rounds; body "
            f"{result['body_bytes']:,} bytes, envelope {result['envelope_bytes']:.0f} bytes",
            f"python keep + encode, body per hit:   {_spread(result['python_us_per_hit'])}",
            f"python keep + encode, body per entry: {_spread(result['python_us_per_entry'])}",
            f"postgres backend CPU per row (batches of {result['batch']}): {_spread(result['pg_cpu_us_per_row'])}",
            f"postgres write wall time per row: {_spread(result['pg_wall_us_per_row'])}",
            f"this process's CPU per row written (asyncpg's encoding): {_spread(result['pg_client_us_per_row'])}",
            f"the loop's longest CPU between turns, writing a batch: {_spread(result['loop_held_ms'], ' ms')}",
            *(
                f"full collections per 1,000 answers, kept {v}: {_spread(result[f'gc_full_per_1k_{v}'], '')}; "
                f"their pauses {_spread(result[f'gc_full_ms_per_1k_{v}'], ' ms')}"
                for v in ("on", "off")
                if f"gc_full_per_1k_{v}" in result
            ),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=2000, help="cached answers served (default 2000)")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds (default 7)")
    parser.add_argument("--batch", type=int, default=700, help="rows per write (default 700)")
    parser.add_argument("--copies", type=int, default=5, help="times the n rows are written a round (default 5)")
    parser.add_argument("--collections", action="store_true", help="also the collector's work, kept on and off")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    result = asyncio.run(measure(args.n, args.rounds, args.batch, args.copies, args.collections))
    print(json.dumps(result) if args.json else report(result))


if __name__ == "__main__":
    main()
