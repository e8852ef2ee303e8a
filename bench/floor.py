"""Cached `/ask` beside its floor: the real server and bench/floor_app.py, same Postgres, same questions.

    .venv/bin/python -m bench.floor [--workers 1] [--http auto] [--loop auto] [--rounds 2]

Starts `provenance serve` (cache on, rate limit off, corpus/ ingested) on an embedded Postgres in a
temporary DATA_DIR, fills its cache with 16 eval questions, starts the floor app on the same Postgres
with the same uvicorn options, and then, at concurrency 1, 8 and 32, loads one and then the other with
the same requests from bench/loadgen.py (alternating, `--rounds` times each, best round kept: other work
on the machine only ever slows a round down). Prints req/s and latency percentiles of both, and the
ratio. `make bench` runs this as one of its phases and writes the table into docs/benchmarks.md.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench import loadgen
from bench.common import embedded_data_dir, machine
from bench.server import REPO_ROOT, Server, bench_environ, load_questions, stop_process
from provenance import report
from provenance.inference.llm_server import free_port

CONCURRENCY = (1, 8, 32)
REQUESTS = {1: 1500, 8: 4000, 32: 4000}
QUESTIONS = 16
CACHED = b'"cached":true'


class Floor:
    """bench/floor_app.py under uvicorn, joined to the Postgres that `server` started."""

    def __init__(self, server: Server, *, workers: int, http: str, loop: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = bench_environ(DATA_DIR=str(server.data_dir), LOG_LEVEL="warning")
        cmd = [
            sys.executable,
            "-m",
            "uvicorn",
            "bench.floor_app:create_app",
            "--factory",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--workers",
            str(workers),
            "--http",
            http,
            "--loop",
            loop,
            "--log-level",
            "warning",
            "--no-access-log",
        ]
        self.log = (server.data_dir / f"floor-{self.port}.log").open("w")
        self.proc = subprocess.Popen(cmd, env=env, cwd=REPO_ROOT, stdout=self.log, stderr=subprocess.STDOUT)

    def wait_ready(self, question: str, timeout_s: float = 60) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.log.flush()
                raise RuntimeError(f"the floor app exited:\n{Path(self.log.name).read_text()[-2000:]}")
            try:
                if httpx.post(f"{self.url}/ask", json={"question": question}, timeout=5).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.25)
        raise RuntimeError("the floor app did not answer")

    def stop(self) -> None:
        stop_process(self.proc, self.log)


@dataclass
class Pair:
    concurrency: int
    real: loadgen.Hits
    floor: loadgen.Hits

    @property
    def ratio(self) -> float:
        return self.real.throughput / self.floor.throughput if self.floor.throughput else 0.0


@dataclass
class FloorReport:
    label: str
    pairs: list[Pair] = field(default_factory=list)
    misses: int = 0  # real-server answers that were not cache hits (there should be none)
    errors: int = 0  # non-200 answers from either


def _best(runs: Sequence[loadgen.Hits]) -> loadgen.Hits:
    return max(runs, key=lambda h: h.throughput)


def measure(
    data_dir: Path,
    questions: Sequence[str],
    *,
    workers: int = 1,
    http: str = "auto",
    loop: str = "auto",
    rounds: int = 2,
    requests: dict[int, int] | None = None,
    log: Callable[[str], None] = print,
    concurrencies: Sequence[int] = CONCURRENCY,
) -> FloorReport:
    requests = requests or REQUESTS
    subset = list(questions[:QUESTIONS])
    report = FloorReport(f"{workers} worker{'s' if workers > 1 else ''}, http={http}, loop={loop}")
    serve_args = ["--http", http, "--loop", loop]
    with Server(data_dir, workers=workers, serve_args=serve_args) as server:
        server.settle()
        host, port = "127.0.0.1", server.port
        loadgen.load(host, port, subset, 4, len(subset))  # fills the cache
        floor = Floor(server, workers=workers, http=http, loop=loop)
        try:
            floor.wait_ready(subset[0])
            for target in (port, floor.port):  # warm connections and statement caches
                loadgen.load(host, target, subset, 8, 400)
            for c in concurrencies:
                n = requests[c]
                real_runs, floor_runs = [], []
                for _ in range(rounds):
                    real_runs.append(loadgen.load(host, port, subset, c, n, marker=CACHED))
                    floor_runs.append(loadgen.load(host, floor.port, subset, c, n))
                for h in (*real_runs, *floor_runs):
                    report.errors += sum(v for k, v in h.codes.items() if k != 200)
                report.misses += sum(h.ok - h.marked for h in real_runs)
                pair = Pair(c, _best(real_runs), _best(floor_runs))
                report.pairs.append(pair)
                log(
                    f"  c={c}: real {pair.real.throughput:.0f} req/s p99 {pair.real.rt(0.99):.1f} ms,"
                    f" floor {pair.floor.throughput:.0f} req/s p99 {pair.floor.rt(0.99):.1f} ms,"
                    f" ratio {pair.ratio:.2f}"
                )
        finally:
            floor.stop()
    return report


def table(reports: Sequence[FloorReport]) -> str:
    head = (
        "server",
        "concurrency",
        "real req/s",
        "real p50 ms",
        "real p99 ms",
        "floor req/s",
        "floor p50 ms",
        "floor p99 ms",
        "real / floor",
    )
    rows = [
        [
            r.label,
            p.concurrency,
            *(v for h in (p.real, p.floor) for v in (f"{h.throughput:.0f}", f"{h.rt(0.5):.1f}", f"{h.rt(0.99):.1f}")),
            f"{p.ratio:.2f}",
        ]
        for r in reports
        for p in r.pairs
    ]
    return "\n".join(report.table(head, "lrrrrrrrr", rows))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--workers", type=int, default=1)
    parser.add_argument("--http", default="auto", choices=["auto", "h11", "httptools"])
    parser.add_argument("--loop", default="auto", choices=["auto", "asyncio", "uvloop"])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--scale", type=float, default=1.0, help="multiply the request counts")
    args = parser.parse_args()
    requests = {c: max(50, int(n * args.scale)) for c, n in REQUESTS.items()}
    with embedded_data_dir("provenance-floor-") as data_dir:
        print(f"machine: {machine()}; load average {os.getloadavg()}")
        report = measure(
            data_dir,
            load_questions(),
            workers=args.workers,
            http=args.http,
            loop=args.loop,
            rounds=args.rounds,
            requests=requests,
        )
        print(table([report]))
        print(f"cache misses {report.misses}, non-200 answers {report.errors}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
