"""Cached /ask at c=8 with the 18F handbook present against a fresh database (issue 34's cached-path target:
within 10%), as an interleaved A/B: two servers on one embedded Postgres, one per schema (corpus/ alone;
corpus/ and the 18F handbook), each warmed, then rounds of bench/loadgen.py against each in turn, the order
swapped every round, so that load from other work on the machine falls on both alike. Reports each side's
median over the rounds and the median of the per-round ratios.

    .venv/bin/python -m bench.cached_ab [--rounds 10] [--requests 2000]
    .venv/bin/python -m bench.cached_ab --data-dir DIR --fresh-schema A --with-schema B   # databases made before

Without --data-dir it makes both in a throwaway DATA_DIR: `provenance ingest` of the 18F handbook (minutes),
and corpus/ ingested by each server at start.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import httpx

from bench import loadgen
from bench.server import REPO_ROOT, Server, bench_environ, load_questions

HANDBOOK = REPO_ROOT.parent / "shared" / "corpora" / "18f-handbook" / "pages"
MARKER = b'"cached":true'


def make_handbook_schema(data_dir: Path, schema: str) -> None:
    env = bench_environ(DATA_DIR=str(data_dir), DB_SCHEMA=schema, LOG_LEVEL="warning", DB_TIMEOUT_S="30")
    cmd = [sys.executable, "-m", "provenance", "ingest", str(HANDBOOK), "--corpus", "18f"]
    subprocess.run(cmd, env=env, cwd=REPO_ROOT, check=True, stdout=subprocess.DEVNULL)


def run(data_dir: Path, schemas: dict[str, str], rounds: int, requests: int) -> None:
    question = load_questions()[0]
    servers: dict[str, Server] = {}
    try:
        for name, schema in schemas.items():
            servers[name] = Server(data_dir, DB_SCHEMA=schema, DB_TIMEOUT_S="30")
            servers[name].wait_ready(600)
        for server in servers.values():
            server.settle()
            httpx.post(f"{server.url}/ask", json={"question": question}, timeout=120)  # fills the cache
            loadgen.load("127.0.0.1", server.port, [question], 8, 300, marker=MARKER)  # warms the connections
        rps: dict[str, list[float]] = {name: [] for name in servers}
        # The tails beside the median (issue 48): a stall that a median can't see shows in p99 and p99.9.
        tails: dict[str, dict[str, list[float]]] = {name: {"p50": [], "p99": [], "p99.9": []} for name in servers}
        for i in range(rounds):
            for name in list(servers) if i % 2 == 0 else list(reversed(servers)):
                hits = loadgen.load("127.0.0.1", servers[name].port, [question], 8, requests, marker=MARKER)
                if hits.marked != requests:
                    raise RuntimeError(f"{name}: {hits.marked} of {requests} answers were cached")
                rps[name].append(hits.throughput)
                for q, values in zip((0.5, 0.99, 0.999), tails[name].values(), strict=True):
                    values.append(hits.rt(q))
                load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
                print(
                    f"round {i} {name}: {hits.throughput:.0f} req/s, p50 {hits.rt(0.5):.1f} ms, p99 {hits.rt(0.99):.1f}"
                    f" ms, p99.9 {hits.rt(0.999):.1f} ms (load {load})"
                )
        for name in servers:
            figures = ", ".join(f"{q} {statistics.median(v):.1f} ms" for q, v in tails[name].items())
            print(f"{name}: median {statistics.median(rps[name]):.0f} req/s, {figures} over {rounds} rounds")
        fresh, with_18f = list(servers)
        ratios = [a / b for a, b in zip(rps[with_18f], rps[fresh], strict=True)]
        print(
            f"{with_18f} / {fresh} per round: {', '.join(f'{r:.2f}' for r in ratios)}; "
            f"median {statistics.median(ratios):.2f}"
        )
        p99_ratios = [a / b for a, b in zip(tails[with_18f]["p99"], tails[fresh]["p99"], strict=True)]
        print(f"{with_18f} / {fresh} p99, median of the rounds: {statistics.median(p99_ratios):.2f}")
    finally:
        for server in servers.values():
            server.stop()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--data-dir", type=Path, default=None)
    parser.add_argument("--fresh-schema", default="ab_fresh")
    parser.add_argument("--with-schema", default="ab_18f", help="a schema holding the 18F corpus")
    args = parser.parse_args()
    schemas = {"fresh database": args.fresh_schema, "with the 18F handbook": args.with_schema}
    if args.data_dir is not None:
        run(args.data_dir, schemas, args.rounds, args.requests)
        return 0
    from provenance.store.embedded_pg import start_embedded, stop_embedded

    data_dir = Path(tempfile.mkdtemp(prefix="provenance-cached-ab-"))
    try:
        start_embedded(data_dir / "pg")  # held by this process, joined by the ingest and the servers
        make_handbook_schema(data_dir, args.with_schema)
        run(data_dir, schemas, args.rounds, args.requests)
    finally:
        stop_embedded(data_dir / "pg")
        shutil.rmtree(data_dir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
