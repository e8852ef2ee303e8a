"""The streamed /ask (`Accept: text/event-stream`): how soon each stage's event reaches the client after the
stage finished on the server, and when the retrieval event arrives, beside the JSON path's total.

    .venv/bin/python -m bench.streaming [--requests 32] [--no-write]

Against a real `provenance serve` subprocess (local profile, answer cache off) on its own embedded Postgres,
at concurrency 1 and 8. A stage event carries `at`, the server's clock when the pipeline set the record; the
client notes its own clock as the event's last line arrives (same machine, same clock). `make bench` runs it
as one of its sections; alone, it rewrites only its own section of docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import httpx

from bench.common import embedded_data_dir, machine, percentile
from bench.server import REPO_ROOT, Server, load, load_questions
from provenance.report import table

DOC = REPO_ROOT / "docs" / "benchmarks.md"
TITLE = "## Streamed /ask: each stage as it completes"
CONCURRENCY = (1, 8)
TARGET_MS = 20.0


@dataclass
class StreamRun:
    concurrency: int
    # Stage finished on the server -> event at the client, for the stages set once the stream could begin
    # (admission on); the checks at the door are set before the request holds a slot, and are sent when it
    # does: their wait is the admission queue's (`queued_ms`).
    lag_ms: list[float] = field(default_factory=list)
    queued_ms: list[float] = field(default_factory=list)
    lag_by_stage: dict[str, list[float]] = field(default_factory=dict)
    retrieval_ms: list[float] = field(default_factory=list)  # request sent -> retrieval event received
    stream_total_ms: list[float] = field(default_factory=list)  # request sent -> response event received
    json_total_ms: list[float] = field(default_factory=list)  # the same questions as JSON, round trip
    errors: int = 0


async def _one(client: httpx.AsyncClient, question: str, run: StreamRun) -> None:
    sent = time.perf_counter()
    event, data = "message", []
    admitted = False
    async with client.stream("POST", "/ask", json={"question": question}, headers={"Accept": "text/event-stream"}) as r:
        if not r.headers.get("content-type", "").startswith("text/event-stream"):
            await r.aread()
            run.errors += 1
            return
        async for line in r.aiter_lines():
            if line:
                field_, _, value = line.partition(":")
                if field_ == "event":
                    event = value.strip()
                elif field_ == "data":
                    data.append(value.removeprefix(" "))
                continue
            arrived, arrived_pc = time.time(), time.perf_counter()
            if event == "stage":
                body = json.loads("\n".join(data))
                lag = (arrived - body["at"]) * 1000
                admitted = admitted or body["stage"] == "admission"
                (run.lag_ms if admitted else run.queued_ms).append(lag)
                run.lag_by_stage.setdefault(body["stage"] + ("" if admitted else " (before admission)"), []).append(lag)
                if body["stage"] == "retrieval":
                    run.retrieval_ms.append((arrived_pc - sent) * 1000)
            elif event == "response":
                run.stream_total_ms.append((arrived_pc - sent) * 1000)
            elif event == "error":
                run.errors += 1
            event, data = "message", []


async def _streamed(url: str, questions: Sequence[str], concurrency: int, requests: int, run: StreamRun) -> None:
    counter = iter(range(requests))
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:

        async def worker() -> None:
            for i in counter:
                await _one(client, questions[i % len(questions)], run)

        await asyncio.gather(*(worker() for _ in range(concurrency)))


def measure(
    server: Server, questions: Sequence[str], requests: int = 32, log: Callable[[str], None] = print
) -> list[StreamRun]:
    """At each concurrency: the questions streamed, then the same questions as JSON."""
    runs = []
    asyncio.run(_streamed(server.url, questions, 2, 4, StreamRun(2)))  # warm-up
    for c in CONCURRENCY:
        run = StreamRun(c)
        asyncio.run(_streamed(server.url, questions, c, requests, run))
        run.json_total_ms = asyncio.run(load(server.url, questions, c, requests)).round_trip_ms
        runs.append(run)
        log(
            f"  c={c}: stage->client p95 {percentile(run.lag_ms, 0.95):.1f} ms, retrieval event p50 "
            f"{percentile(run.retrieval_ms, 0.5):.0f} ms, JSON total p50 {percentile(run.json_total_ms, 0.5):.0f} ms"
        )
    return runs


def _p(values: Sequence[float], decimals: int = 1) -> str:
    if not values:
        return "—"
    return f"{percentile(values, 0.5):.{decimals}f} / {percentile(values, 0.95):.{decimals}f}"


def section(runs: Sequence[StreamRun], requests: int, machine_text: str) -> str:
    worst = max((percentile(r.lag_ms, 0.95) for r in runs), default=0.0)
    verdict = "met" if worst <= TARGET_MS else "missed"
    lines = [
        TITLE,
        "",
        f"`bench/streaming.py`: {requests} uncached questions (the eval questions, answer cache off) streamed with "
        "`Accept: text/event-stream` from a real `provenance serve` (local profile), then the same questions as "
        "JSON. *Stage → client* is the time from the pipeline setting a stage's record (its event's `at`) to the "
        "event's last line reaching the client (httpx, same machine, same clock), over every stage event; "
        "*retrieval event* and *response event* count from the request being sent. p50 / p95, milliseconds. "
        "The stream begins once the request holds a pipeline slot (ASK_CONCURRENCY, the cores): the bot check, "
        "the cache and the rate limit's first look are set before that and sent when the slot is granted, so "
        "their delay (*before admission*) is the wait in the admission queue, not the stream's.",
        "",
        *table(
            (
                "concurrency",
                "stage → client",
                "before admission",
                "retrieval event",
                "response event (stream total)",
                "JSON total",
                "errors",
            ),
            "rrrrrrr",
            (
                [
                    r.concurrency,
                    _p(r.lag_ms),
                    _p(r.queued_ms),
                    _p(r.retrieval_ms, 0),
                    _p(r.stream_total_ms, 0),
                    _p(r.json_total_ms, 0),
                    r.errors,
                ]
                for r in runs
            ),
        ),
    ]
    lines += ["", "Stage → client by stage (p50 / p95 ms), at each concurrency:", ""]
    stages = list(dict.fromkeys(s for r in runs for s in r.lag_by_stage))
    lines += table(
        ("stage", *(f"c={r.concurrency}" for r in runs)),
        "l" + "r" * len(runs),
        ([stage, *(_p(r.lag_by_stage.get(stage, [])) for r in runs)] for stage in stages),
    )
    lines += [
        "",
        f"Target: each stage's event at the client within {TARGET_MS:.0f} ms (p95) of the stage finishing: "
        f"**{verdict}** (worst p95 {worst:.1f} ms, stages set once the stream began). Each event is written as its "
        "record is set; nothing waits for a batch. The retrieval event arrives before the answer: the reader sees "
        "what was found while generation and the checks run (with the local profile the whole answer takes tens "
        "of milliseconds; with a model in the loop, seconds).",
        "",
        f"Measured on {machine_text}, a machine shared with other work while it ran (the figures at "
        "concurrency 8 include waiting for the CPU: two cores, eight pipelines).",
        "",
    ]
    return "\n".join(lines)


def write_section(text: str) -> None:
    """Replace this module's section of docs/benchmarks.md (or add it after the uncached /ask sections)."""
    doc = DOC.read_text()
    if TITLE in doc:
        start = doc.index(TITLE)
        end = doc.find("\n## ", start + len(TITLE))
        doc = doc[:start] + text.rstrip("\n") + "\n" + (doc[end:] if end >= 0 else "")
    else:
        anchor = doc.find("\n## Cached /ask")
        doc = doc[: anchor + 1] + text.rstrip("\n") + "\n\n" + doc[anchor + 1 :] if anchor >= 0 else doc + "\n" + text
    DOC.write_text(doc)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--requests", type=int, default=32, help="questions per concurrency")
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    args = parser.parse_args()
    from provenance.logs import configure_logging

    configure_logging("warning")
    with embedded_data_dir("provenance-bench-stream-") as data_dir, Server(data_dir, CACHE_TTL_S="0") as server:
        server.settle()
        runs = measure(server, load_questions(), args.requests)
    text = section(runs, args.requests, machine())
    print(text)
    if not args.no_write:
        write_section(text)
        print(f"wrote its section of {DOC.relative_to(REPO_ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
