"""Where the API's upload of a whole handbook spends the seconds that `provenance ingest` of the same files
does not: both sides run in this process, each into a fresh schema of one embedded Postgres, with the same
ingest and store functions timed by wrapping them (bench/upload_phases.py's `wrapped`, plus the switch's
statements and the jobs' own reads and writes), and the Postgres processes' CPU seconds counted beside.

- CLI: `provenance ingest DIR --corpus hb` as its command runs it (`jobs.commands.ingest_folder`), EMBED_THREADS=2.
- API: the files uploaded 20 a request (UPLOAD_MAX_FILES) to the app served on loopback with no worker of its
  own, then one `Worker` (as `provenance worker --threads 2 --once` runs it) takes the 13 jobs; timed from the
  first job taken to the last one done.

    .venv/bin/python -m bench.upload_split [--files N] [--pairs P]

Prints each side's phases, a pair at a time; nothing is written to the docs (the figures go in by hand).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import psutil

from bench.common import embedded_data_dir, scratch_store
from bench.upload_phases import InProcessServer, Phases, admin_key, wrapped
from bench.upload_scale import PER_REQUEST, flat_copy
from provenance.jobs import commands
from provenance.jobs import worker as worker_module
from provenance.services import load_embedder
from provenance.settings import Settings, load_settings
from provenance.store import corpora as corpora_store
from provenance.store import sources as sources_store
from provenance.store.pool import create_pool, resolve_database_url

# The switch's statements, one phase each, and the jobs' own reads and writes around the ingest.
SWITCH_STEPS = (
    "_drop_stale_staging",
    "_count_unstaged",
    "_remove_dropped_passages",
    "_drop_outdated_sentences",
    "_write_staged_passages",
    "_move_unchanged_passages",
    "_write_staged_sentences",
    "_count_common_lexemes",
    "_write_corpus_state",
)
STORE_CALLS: tuple[tuple[Any, str, str], ...] = (
    (corpora_store.CorpusStore, "stored_passages", "store: stored passages read"),
    (corpora_store.CorpusStore, "staged_passages", "store: staged passages read"),
    (corpora_store.CorpusStore, "missing_sentences", "sentences phase: reads"),
    (corpora_store.CorpusStore, "count_missing_sentences", "sentences phase: reads"),
    (corpora_store.CorpusStore, "write_sentences", "sentences phase: writes"),
    (sources_store.SourceStore, "originals", "job: originals read"),
    (sources_store.SourceStore, "add", "job: documents recorded"),
    (worker_module.JobRun, "complete_sentences", "sentences phase (whole)"),
)


@contextmanager
def more_wrapped(phases: Phases) -> Iterator[None]:
    """The switch's statements and the jobs' store calls timed for the duration."""
    targets = [(corpora_store, name, f"switch: {name.strip('_').replace('_', ' ')}") for name in SWITCH_STEPS]
    targets += list(STORE_CALLS)
    originals = [(owner, name, getattr(owner, name)) for owner, name, _ in targets]
    for owner, name, phase in targets:
        setattr(owner, name, phases.timed(phase, getattr(owner, name)))
    try:
        yield
    finally:
        for owner, name, original in originals:
            setattr(owner, name, original)


def postgres_cpu_s() -> float:
    """CPU seconds of the Postgres processes so far: the live ones', and the ones' the postmaster reaped."""
    total = 0.0
    for proc in psutil.process_iter(["name"]):
        if proc.info["name"] not in ("postgres", "postmaster"):
            continue
        try:
            t = proc.cpu_times()
        except psutil.Error:
            continue
        total += t.user + t.system
        if proc.ppid() == 1 or proc.parent() is None or proc.parent().name() not in ("postgres", "postmaster"):
            total += t.children_user + t.children_system
    return total


class Measured:
    def __init__(self) -> None:
        self.phases = Phases()
        self.wall = 0.0
        self.cpu = 0.0
        self.pg_cpu = 0.0

    @contextmanager
    def timing(self) -> Iterator[None]:
        wall, cpu, pg = time.perf_counter(), time.process_time(), postgres_cpu_s()
        with wrapped(self.phases), more_wrapped(self.phases):
            yield
        self.wall = time.perf_counter() - wall
        self.cpu = time.process_time() - cpu
        self.pg_cpu = postgres_cpu_s() - pg

    def row(self) -> dict[str, float]:
        return {"wall": self.wall, "this process's CPU": self.cpu, "Postgres CPU": self.pg_cpu, **self.phases.seconds}


async def cli_side(base: Settings, folder: Path) -> Measured:
    m = Measured()
    async with scratch_store(base) as (_, scratch):
        settings = scratch.with_overrides(embed_threads=2)
        pool = await create_pool(resolve_database_url(settings), settings)
        try:
            with m.timing():
                await commands.ingest_folder(settings, pool, folder, corpus="hb")
        finally:
            await pool.close()
    return m


def _upload(url: str, key: str, folder: Path) -> int:
    files = sorted(folder.iterdir())
    with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {key}"}, timeout=300) as client:
        assert client.post("/corpora", json={"name": "hb", "visibility": "public"}).status_code == 201
        for i in range(0, len(files), PER_REQUEST):
            batch = [("files", (p.name, p.read_bytes(), "text/plain")) for p in files[i : i + PER_REQUEST]]
            r = client.post("/corpora/hb/documents", files=batch)
            assert r.status_code == 202, r.text
    return (len(files) + PER_REQUEST - 1) // PER_REQUEST


async def api_side(base: Settings, folder: Path) -> Measured:
    m = Measured()
    async with scratch_store(base) as (_, scratch):
        settings = scratch.with_overrides(ingest_workers=0, upload_rate_per_hour=0, rate_limit_per_hour=0)
        dsn = resolve_database_url(settings)
        key = await admin_key(settings, dsn)
        with InProcessServer(settings) as server:
            jobs = await asyncio.to_thread(_upload, server.url, key, folder)
        pool = await create_pool(dsn, settings)
        try:
            worker = worker_module.Worker(settings, pool, lambda: load_embedder(settings, for_ingest=True, threads=2))
            with m.timing():
                ran = 0
                while await worker.run_once():
                    ran += 1
            assert ran == jobs, (ran, jobs)
        finally:
            await pool.close()
    return m


def table(cli: list[Measured], api: list[Measured]) -> str:
    names = list(dict.fromkeys([k for m in [*cli, *api] for k in m.row()]))
    heads = [*(f"CLI {i + 1}" for i in range(len(cli))), *(f"API {i + 1}" for i in range(len(api)))]
    lines = ["| phase | " + " | ".join(heads) + " |"]
    lines.append("|---|" + "---:|" * (len(cli) + len(api)))
    for name in names:
        cells = [f"{m.row().get(name, 0.0):.1f}" for m in [*cli, *api]]
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


async def main_async(files: int, pairs: int) -> None:
    base = load_settings().with_overrides(log_level="warning", profile="local")
    folder = Path(tempfile.mkdtemp(prefix="bench-split-"))
    try:
        flat_copy(files, folder)
        cli: list[Measured] = []
        api: list[Measured] = []
        for k in range(pairs):
            for side in ("cli", "api") if k % 2 == 0 else ("api", "cli"):
                print(f"{side}, load {os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)
                (cli if side == "cli" else api).append(await (cli_side if side == "cli" else api_side)(base, folder))
                print(f"  wall {(cli if side == 'cli' else api)[-1].wall:.1f} s", file=sys.stderr, flush=True)
            print(table(cli, api), flush=True)
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=10_000, help="the first N files of the handbook (default all)")
    parser.add_argument("--pairs", type=int, default=1)
    args = parser.parse_args()
    with embedded_data_dir("bench-split-"):
        asyncio.run(main_async(args.files, args.pairs))


if __name__ == "__main__":
    main()
