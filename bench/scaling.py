"""Throughput against uvicorn workers: `provenance serve --workers N` (N = 1, 2, 4) on one embedded Postgres.

Every run asks the same uncached questions (CACHE_TTL_S=0, rate limit off, local profile) from a fixed
number of concurrent clients on loopback, and records throughput, latency and where the CPU went (the
server's workers, Postgres, the load generator, and the machine as a whole, other users included).

    .venv/bin/python -m bench.scaling [--workers 1,2,4] [--concurrency 16] [--requests 64]

Rewrites the table between the SCALING markers in docs/scaling.md (unless --no-write).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from bench.common import machine
from bench.server import REPO_ROOT, LoadResult, Sampler, Server, load_questions, measured_load
from provenance import report

DOC = REPO_ROOT / "docs" / "scaling.md"
BEGIN, END = "<!-- SCALING_TABLE -->", "<!-- /SCALING_TABLE -->"


@dataclass
class ScalingRow:
    workers: int
    result: LoadResult
    peak_server_mib: float
    peak_pg_mib: float


def measure(
    data_dir: Path, workers: Sequence[int], concurrency: int, requests: int, log: bool = True
) -> list[ScalingRow]:
    questions = load_questions()
    rows = []
    for n in workers:
        started = time.monotonic()
        with Server(data_dir, workers=n, CACHE_TTL_S="0") as server:
            server.settle()
            # Warm every worker (first-question costs, pool connections) outside the measurement.
            measured_load(server, questions, concurrency=2 * n, requests=4 * n, offset=len(questions) // 2)
            with Sampler(server) as sampler:
                result = measured_load(server, questions, concurrency, requests)
        rows.append(ScalingRow(n, result, sampler.peak_server_mib, sampler.peak_pg_mib))
        if log:
            print(
                f"  workers {n}: {result.throughput:.2f} req/s, p50 {result.rt(0.5):.0f} ms "
                f"({time.monotonic() - started:.0f} s)",
                flush=True,
            )
    return rows


def table(rows: Sequence[ScalingRow]) -> str:
    base = rows[0].result.throughput if rows else 0.0
    head = (
        "workers",
        "req/s",
        "vs 1 worker",
        "p50 ms",
        "p95 ms",
        "CPU s: server",
        "Postgres",
        "load generator",
        "other users",
        "machine busy",
        "peak RSS server MiB",
        "Postgres MiB",
    )
    out = []
    for row in rows:
        r = row.result
        cores = os.cpu_count() or 1
        window = r.cpu["window_s"]
        busy = min(1.0, r.cpu["machine_busy"] / (window * cores)) if window else 0.0
        cpu = (r.cpu["server"], r.cpu["postgres"], r.cpu["client"], r.cpu["others"])
        out.append(
            [
                row.workers,
                f"{r.throughput:.2f}",
                f"{r.throughput / base if base else 0:.2f}×",
                f"{r.rt(0.5):.0f}",
                f"{r.rt(0.95):.0f}",
                *(f"{c:.1f}" for c in cpu),
                f"{100 * busy:.0f}% of {cores} cores",
                f"{row.peak_server_mib:.0f}",
                f"{row.peak_pg_mib:.0f}",
            ]
        )
    return "\n".join(report.table(head, "r" * len(head), out))


def summary(rows: Sequence[ScalingRow], concurrency: int, requests: int, load_avg: str) -> str:
    """The measured table and the facts read straight off it, for docs/scaling.md."""
    lines = [
        f"Measured by `python -m bench.scaling` on {machine()}; load average (1/5/15 min) before the run: {load_avg}.",
        f"Each row: {requests} uncached POST /ask (local profile, CACHE_TTL_S=0, eval questions in turn) from "
        f"{concurrency} concurrent clients on loopback, after a warm-up; CPU seconds are user+system over the "
        "measured window; 'other users' is the rest of the machine's busy time (other engineers' work on "
        "this shared machine).",
        "",
        table(rows),
    ]
    if rows:
        r0 = rows[0].result
        per_req = {row.workers: (row.result.cpu["server"] / max(1, len(row.result.bodies))) for row in rows}
        server_share = r0.cpu["server"] / r0.cpu["machine_busy"] if r0.cpu["machine_busy"] else 0.0
        best = max(rows, key=lambda row: row.result.throughput)
        lines += [
            "",
            f"With one worker the server's own processes used {100 * server_share:.0f}% of the CPU time the "
            f"machine was busy during the run, Postgres {r0.cpu['postgres']:.1f} s of "
            f"{r0.cpu['machine_busy']:.1f} s; server CPU per request was "
            + ", ".join(f"{1000 * v:.0f} ms at {k} worker{'s' if k > 1 else ''}" for k, v in per_req.items())
            + f". The best throughput was {best.result.throughput:.2f} req/s at {best.workers} worker"
            + ("s." if best.workers > 1 else "."),
        ]
    return "\n".join(lines)


def write_doc(text: str, doc: Path = DOC) -> None:
    current = doc.read_text()
    block = f"{BEGIN}\n{text}\n{END}"
    if BEGIN in current and END in current:
        updated = re.sub(re.escape(BEGIN) + r".*?" + re.escape(END), lambda _: block, current, flags=re.DOTALL)
    else:
        updated = current.rstrip() + "\n\n" + block + "\n"
    doc.write_text(updated)


def load_average() -> str:
    one, five, fifteen = os.getloadavg()
    return f"{one:.2f} / {five:.2f} / {fifteen:.2f} on {os.cpu_count()} cores"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", default="1,2,4")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--requests", type=int, default=64)
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/scaling.md alone")
    args = parser.parse_args()
    from provenance.store.embedded_pg import start_embedded

    data_dir = Path(tempfile.mkdtemp(prefix="provenance-scaling-"))
    try:
        start_embedded(data_dir / "pg")  # held for the whole run; every server joins it
        load_avg = load_average()
        rows = measure(data_dir, [int(w) for w in args.workers.split(",")], args.concurrency, args.requests)
    finally:
        from provenance.store.embedded_pg import stop_embedded

        stop_embedded(data_dir / "pg")
        shutil.rmtree(data_dir, ignore_errors=True)
    text = summary(rows, args.concurrency, args.requests, load_avg)
    print(text)
    if not args.no_write:
        write_doc(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
