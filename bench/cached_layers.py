"""Where a cached answer's CPU goes: the cached `/ask` peeled layer by layer, in process.

    .venv/bin/python -m bench.cached_layers [-n 3000]
    .venv/bin/python -m bench.cached_layers --metrics [-n 3000] [--rounds 7] [--json]
    .venv/bin/python -m bench.cached_layers --feedback [-n 3000] [--rounds 9] [--json]

One process holds the real app (its lifespan run, so its pool and pipeline are those of a server) and the
floor app (bench/floor_app.py) on an embedded Postgres with corpus/ ingested and one question cached. Each
layer is called `n` times in turn over ASGI directly (no sockets, no HTTP parsing), and this process's CPU
time per call (time.process_time: Postgres's share is not in it) is reported, from the bare statement
up to the whole app. The difference between two rows is what that layer costs.

`--feedback` measures what keeping every served response for readers' verdicts costs (FEEDBACK_ENABLED on
and off, interleaved the same way; the on rounds include writing the batches they left).

`--metrics` measures instead what the Prometheus metrics (provenance.metrics) add to a cached answer: the
real app twice, METRICS_ENABLED on and off, called in interleaved rounds (on, off; then off, on; ...), the
median of each. The metrics count in PROMETHEUS_MULTIPROC_DIR's files, as under `provenance serve` (a fresh
folder when it is unset), so the cost is that of the mmap writes a served worker makes.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import shutil
import statistics
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import msgspec
from litestar import Litestar

from bench.common import embedded_data_dir
from bench.server import load_questions
from provenance.report import table

Call = Callable[[], Awaitable[Any]]


def _scope(body: bytes) -> dict[str, Any]:
    return {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/ask",
        "raw_path": b"/ask",
        "query_string": b"",
        "root_path": "",
        "headers": [
            (b"host", b"127.0.0.1"),
            (b"content-type", b"application/json"),
            (b"content-length", str(len(body)).encode()),
        ],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8000),
        "state": {},
    }


def asgi_call(app: Any, body: bytes) -> Call:
    async def call() -> int:
        sent: list[dict[str, Any]] = []

        async def receive() -> dict[str, Any]:
            return {"type": "http.request", "body": body, "more_body": False}

        async def send(message: dict[str, Any]) -> None:
            sent.append(message)

        await app(_scope(body), receive, send)
        status: int = sent[0]["status"]
        if status != 200:
            raise RuntimeError(f"status {status}")
        return status

    return call


async def start(app: Litestar) -> None:
    """Run the app's lifespan start-up, as uvicorn does, and leave it running."""
    inbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    outbox: asyncio.Queue[dict[str, Any]] = asyncio.Queue()
    await inbox.put({"type": "lifespan.startup"})
    asyncio.get_running_loop().create_task(
        app({"type": "lifespan", "asgi": {"version": "3.0"}, "state": {}}, inbox.get, outbox.put)  # type: ignore[arg-type]
    )
    message = await outbox.get()
    if message["type"] != "lifespan.startup.complete":
        raise RuntimeError(f"start-up failed: {message}")


async def measure(n: int) -> list[tuple[str, float]]:
    from litestar.di import Provide

    from bench.floor_app import create_app as floor_app
    from provenance.app import create_app
    from provenance.http import routes
    from provenance.services import Services
    from provenance.settings import load_settings
    from provenance.store.guards import CACHE_GET_SQL

    question = load_questions()[0]
    body = msgspec.json.encode({"question": question})
    real = create_app(load_settings())
    await start(real)
    svc: Services = real.state.services
    await asgi_call(real, body)()  # answers, and fills the cache
    key = svc.pipeline.answer_cache_key(question, svc.pipeline.corpora.default)
    floor = floor_app()
    await start(floor)
    # The /ask handler alone in Litestar: the real app less our middleware and hooks.
    bare = Litestar(
        route_handlers=[routes.ask],
        dependencies={"services": Provide(routes.provide_services, sync_to_thread=False)},
        debug=False,
    )
    bare.state.services = svc

    async def pipeline_ask() -> Any:
        return await svc.pipeline.ask(question, request_id="bench", peer_ip="127.0.0.1", headers={})

    layers: list[tuple[str, Call]] = [
        ("the statement (pool.fetchrow)", lambda: svc.pool.fetchrow(CACHE_GET_SQL, key)),
        ("+ Store.cache_get (acquire under a timeout)", lambda: svc.store.cache_get(key)),
        ("+ the cache guard (decode, stage record)", lambda: svc.pipeline.guards.cache_get(key)),
        ("+ the pipeline (corpus, bot check, key, reply)", pipeline_ask),
        ("+ Litestar and the /ask handler", asgi_call(bare, body)),
        ("+ our middleware and hooks: the real app", asgi_call(real, body)),
        ("floor app (bench/floor_app.py), for comparison", asgi_call(floor, body)),
    ]
    best: dict[str, float] = {}
    for _ in range(3):  # rounds in turn; the least CPU of each is kept (noise only adds)
        for name, call in layers:
            for _ in range(n // 10):
                await call()
            started = time.process_time()
            for _ in range(n):
                await call()
            us = (time.process_time() - started) / n * 1e6
            best[name] = min(best.get(name, us), us)
    return [(name, best[name]) for name, _ in layers]


# What the metrics may add to a cached answer's CPU (issue 27).
METRICS_BUDGET = 0.10


async def measure_metrics(n: int, rounds: int) -> dict[str, Any]:
    """CPU µs per cached /ask, each round's, with the metrics on and off."""
    from provenance import metrics
    from provenance.app import create_app
    from provenance.settings import load_settings

    question = load_questions()[0]
    body = msgspec.json.encode({"question": question})
    apps = {
        "on": create_app(load_settings().with_overrides(metrics_enabled=True)),
        "off": create_app(load_settings().with_overrides(metrics_enabled=False)),
        # Answers the question first, so that neither measured app is the one that ran the whole pipeline.
        "primer": create_app(load_settings().with_overrides(metrics_enabled=False)),
    }
    for app in apps.values():
        await start(app)  # start-up computes nothing in the background (the corpus's vectors are stored)
    calls = {name: asgi_call(app, body) for name, app in apps.items()}
    await calls.pop("primer")()  # fills the cache both read (the metrics are not in its key)
    per_round: dict[str, list[float]] = {"on": [], "off": []}
    for r in range(rounds):
        for name in ("on", "off") if r % 2 == 0 else ("off", "on"):
            call = calls[name]
            for _ in range(n // 10):
                await call()
            started = time.process_time()
            for _ in range(n):
                await call()
            per_round[name].append((time.process_time() - started) / n * 1e6)
    return {"n": n, "rounds": rounds, "multiprocess": metrics.multiprocess(), **per_round}


# What keeping every served response for feedback may add to a cached answer's CPU (issue 36).
FEEDBACK_BUDGET = 0.05


async def measure_feedback(n: int, rounds: int) -> dict[str, Any]:
    """CPU µs per cached /ask, each round's, with the response log (FEEDBACK_ENABLED) on and off. The on app's
    rounds end by writing what its log holds, inside the timing: the batched writes are its cost, not the next
    round's. Postgres's side of those writes is timed apart, as the statements' wall time per response."""
    from provenance.app import create_app
    from provenance.settings import load_settings

    question = load_questions()[0]
    body = msgspec.json.encode({"question": question})
    apps = {
        "on": create_app(load_settings().with_overrides(feedback_enabled=True)),
        "off": create_app(load_settings().with_overrides(feedback_enabled=False)),
        "primer": create_app(load_settings().with_overrides(feedback_enabled=False)),
    }
    for app in apps.values():
        await start(app)  # start-up computes nothing in the background (the corpus's vectors are stored)
    responses = apps["on"].state.services.feedback.responses
    store = responses.store
    written: list[tuple[int, float]] = []  # (responses, seconds) of each batched write

    async def timed(rows: Any) -> int:
        started = time.perf_counter()
        kept: int = await keep(rows)
        written.append((len(rows), time.perf_counter() - started))
        return kept

    keep = store.keep_responses
    store.keep_responses = timed
    calls = {name: asgi_call(app, body) for name, app in apps.items()}
    await calls.pop("primer")()
    per_round: dict[str, list[float]] = {"on": [], "off": []}
    for r in range(rounds):
        for name in ("on", "off") if r % 2 == 0 else ("off", "on"):
            call = calls[name]
            for _ in range(n // 10):
                await call()
            await responses.flush()
            started = time.process_time()
            for _ in range(n):
                await call()
            if name == "on":
                await responses.flush()
            per_round[name].append((time.process_time() - started) / n * 1e6)
    # The log's own CPU per response, apart from the request around it (far less noise than the A/B's
    # difference of two whole requests): keep() n responses with distinct ids, then write them.
    svc = apps["on"].state.services
    sample = (await svc.pipeline.ask(question, request_id="bench-sample", peer_ip="127.0.0.1", headers={})).response
    isolated: list[float] = []
    for r in range(rounds):
        batch = [msgspec.structs.replace(sample, request_id=f"bench-{r}-{i}") for i in range(n)]
        started = time.process_time()
        for response in batch:
            responses.keep(response)
        await responses.flush()
        isolated.append((time.process_time() - started) / n * 1e6)
    rows = sum(k for k, _ in written)
    return {
        "isolated_us": statistics.median(isolated),
        "n": n,
        "rounds": rounds,
        "flush_ms": responses.flush_s * 1000,
        "writes": len(written),
        "rows": rows,
        "pg_us_per_row": sum(s for _, s in written) / max(rows, 1) * 1e6,
        **per_round,
    }


class _AB(msgspec.Struct, frozen=True):
    """A layer's cost, on against off, in interleaved rounds: what both A/B tables report."""

    on: float
    off: float
    added: float
    verdict: str
    rounds: str
    paired: float


def _ab(cost: dict[str, Any], budget: float) -> _AB:
    on, off, added = metrics_summary(cost)
    pairs = list(zip(cost["on"], cost["off"], strict=True))
    rounds = ", ".join(f"{a:.0f}/{b:.0f}" for a, b in pairs)
    paired = statistics.median(a - b for a, b in pairs)
    return _AB(on, off, added, "within" if added <= budget else "**over**", rounds, paired)


def feedback_table(cost: dict[str, Any]) -> str:
    ab = _ab(cost, FEEDBACK_BUDGET)
    on, off, added = ab.on, ab.off, ab.added
    kept = f"on (every response kept, written every {cost['flush_ms']:.0f} ms)"
    return "\n".join(
        [
            *table(
                ("feedback retention", "CPU µs per cached /ask (median)"),
                "lr",
                [["off (FEEDBACK_ENABLED=false)", f"{off:.0f}"], [kept, f"{on:.0f}"]],
            ),
            "",
            f"Keeping every response adds **{added:+.1%}** ({on - off:+.0f} µs) to a cached answer's CPU, "
            f"{ab.verdict} the {FEEDBACK_BUDGET:.0%} allowed; {cost['rounds']} interleaved rounds of {cost['n']:,} "
            f"calls each (on/off µs per round: {ab.rounds}; the median of the rounds' differences is "
            f"{ab.paired:+.0f} µs). "
            f"The {cost['rows']:,} responses kept went in {cost['writes']:,} batched writes; Postgres's side, "
            f"not in the CPU above, took {cost['pg_us_per_row']:.0f} µs of wall time per response.",
            "",
            f"Measured apart from the request around it (`keep()` then the batched write, {cost['n']:,} responses "
            f"a round, the median of {cost['rounds']} rounds), the log costs this process "
            f"**{cost['isolated_us']:.1f} µs** per response: {cost['isolated_us'] / off:.1%} of a cached answer "
            "with it off.",
        ]
    )


def metrics_summary(cost: dict[str, Any]) -> tuple[float, float, float]:
    """(median µs on, median µs off, what the metrics add as a fraction of off)."""
    on, off = statistics.median(cost["on"]), statistics.median(cost["off"])
    return on, off, (on - off) / off


def metrics_table(cost: dict[str, Any]) -> str:
    ab = _ab(cost, METRICS_BUDGET)
    on, off, added = ab.on, ab.off, ab.added
    return "\n".join(
        [
            *table(
                ("metrics", "CPU µs per cached /ask (median)"),
                "lr",
                [["off (METRICS_ENABLED=false)", f"{off:.0f}"], ["on", f"{on:.0f}"]],
            ),
            "",
            f"The metrics add **{added:+.1%}** ({on - off:+.0f} µs) to a cached answer's CPU, {ab.verdict} the "
            f"{METRICS_BUDGET:.0%} allowed; {cost['rounds']} interleaved rounds of {cost['n']:,} calls each "
            f"(on/off µs per round: {ab.rounds}; the median of the rounds' differences is {ab.paired:+.0f} µs), "
            f"counting into multiprocess files: {cost['multiprocess']}.",
        ]
    )


def layers_table(rows: list[tuple[str, float]]) -> str:
    out = []
    previous: float | None = None
    for name, us in rows:
        added = "" if previous is None or name.startswith("floor") else f"{us - previous:+.0f}"
        out.append([name, f"{us:.0f}", added])
        if not name.startswith("floor"):
            previous = us
    return "\n".join(table(("layer", "CPU µs per call", "added by the layer"), "lrr", out))


def run(n: int) -> list[tuple[str, float]]:
    """In a fresh event loop; the caller provides DATA_DIR or DATABASE_URL."""
    return asyncio.run(measure(n))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=3000, help="calls per layer per round (default 3000)")
    parser.add_argument("--metrics", action="store_true", help="the metrics' cost instead of the layers")
    parser.add_argument("--feedback", action="store_true", help="the response log's cost instead of the layers")
    parser.add_argument(
        "--rounds", type=int, default=9, help="with --metrics or --feedback: interleaved rounds (default 9)"
    )
    parser.add_argument("--json", action="store_true", help="with --metrics: the figures as JSON (bench/run.py)")
    args = parser.parse_args()
    os.environ.update(LOG_LEVEL="warning", RATE_LIMIT_PER_HOUR="0")
    # Joins the Postgres bench/run.py started when it is there; else one of its own.
    database = contextlib.nullcontext() if os.environ.get("DATABASE_URL") else embedded_data_dir("provenance-layers-")
    with database, _multiprocess_dir():
        if args.feedback:
            cost = asyncio.run(measure_feedback(args.n, args.rounds))
            print(json.dumps(cost) if args.json else feedback_table(cost))
            return 0
        if not args.metrics:
            print(layers_table(run(args.n)))
            return 0
        cost = asyncio.run(measure_metrics(args.n, args.rounds))
        print(json.dumps(cost) if args.json else metrics_table(cost))
    return 0


@contextlib.contextmanager
def _multiprocess_dir() -> Iterator[None]:
    """As `provenance serve` does, and before prometheus-client is first imported (create_app imports it)."""
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        yield
        return
    made = tempfile.mkdtemp(prefix="provenance-bench-metrics-")
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = made
    try:
        yield
    finally:
        shutil.rmtree(made, ignore_errors=True)


if __name__ == "__main__":
    raise SystemExit(main())
