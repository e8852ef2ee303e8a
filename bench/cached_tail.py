"""Cached /ask under a real load generator, as an interleaved A/B that reports the tails (issue 48).

    .venv/bin/python -m bench.cached_tail                        # FEEDBACK_ENABLED on against off
    .venv/bin/python -m bench.cached_tail --setting METRICS_ENABLED
    .venv/bin/python -m bench.cached_tail --base bf30787         # this checkout against a commit, same settings
    [--rounds 5] [--seconds 10] [--concurrency 1,8,32] [--no-write]

A median can't see a stall: the response log's batched write held the event loop and two cores' worth of
Postgres for tens of milliseconds twice a second, which cost the cached path 12x its p99 while
bench/cached_layers.py's median CPU per call moved by 2%. So this drives two real `provenance serve`
processes (local profile, rate limit off, one embedded Postgres, a schema each) with wrk (Debian's package,
`make wrk`), which keeps every latency in an HdrHistogram, and reads p50, p99 and p99.9 from it. Each round
runs every concurrency against both sides, the order swapped every round, so that other work on the machine
falls on both alike; the report gives each side's median over the rounds and the median of the per-round
ratios (on / off, or this checkout / base).

With --base, the other side is that commit checked out in a temporary git worktree and served from there.
Rewrites the CACHED_TAIL section of docs/benchmarks.md unless --no-write.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import tempfile
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench.common import machine, write_section
from bench.server import REPO_ROOT, Server, load_questions
from provenance.report import table

DOC = REPO_ROOT / "docs" / "benchmarks.md"
BEGIN, END = "<!-- CACHED_TAIL -->", "<!-- /CACHED_TAIL -->"
# wrk's Lua hook: the whole run's figures as one JSON line (latencies in microseconds).
WRK_SCRIPT = """
wrk.method = "POST"
wrk.headers["Content-Type"] = "application/json"
wrk.body = os.getenv("BENCH_BODY")
done = function(summary, latency, requests)
  local e = summary.errors
  io.write(string.format(
    '{"requests":%d,"us":%d,"errors":%d,"p50":%d,"p99":%d,"p999":%d,"max":%d}\\n',
    summary.requests, summary.duration, e.connect + e.read + e.write + e.status + e.timeout,
    latency:percentile(50), latency:percentile(99), latency:percentile(99.9), latency.max))
end
"""


@dataclass
class Run:
    rps: float
    p50_ms: float
    p99_ms: float
    p999_ms: float
    max_ms: float
    errors: int


@dataclass
class Side:
    name: str
    runs: dict[int, list[Run]] = field(default_factory=dict)

    def median(self, c: int, attr: str) -> float:
        return float(statistics.median(getattr(r, attr) for r in self.runs[c]))


def wrk(url: str, concurrency: int, seconds: float, script: Path, body: str) -> Run:
    threads = 1 if concurrency == 1 else 2
    cmd = ["wrk", f"-t{threads}", f"-c{concurrency}", f"-d{seconds:g}s", "-s", str(script), f"{url}/ask"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True, env={**os.environ, "BENCH_BODY": body})
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    return Run(
        rps=figures["requests"] / (figures["us"] / 1e6),
        p50_ms=figures["p50"] / 1000,
        p99_ms=figures["p99"] / 1000,
        p999_ms=figures["p999"] / 1000,
        max_ms=figures["max"] / 1000,
        errors=figures["errors"],
    )


@contextmanager
def checkout(commit: str) -> Iterator[Path]:
    """`commit` in a temporary git worktree, removed afterwards."""
    path = Path(tempfile.mkdtemp(prefix="provenance-base-"))
    subprocess.run(["git", "worktree", "add", "--detach", str(path), commit], cwd=REPO_ROOT, check=True)
    try:
        yield path
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(path)], cwd=REPO_ROOT, check=False)
        shutil.rmtree(path, ignore_errors=True)


def run(args: argparse.Namespace, data_dir: Path) -> tuple[list[Side], str]:
    question = load_questions()[0]
    body = json.dumps({"question": question})
    script = data_dir / "cached_tail.lua"
    script.write_text(WRK_SCRIPT)
    with ExitStack() as stack:
        sides: dict[str, tuple[dict[str, str], Path]]
        if args.base:
            base_root = stack.enter_context(checkout(args.base))
            sides = {"this checkout": ({}, REPO_ROOT), f"base {args.base}": ({}, base_root)}
            what = f"this checkout against {args.base}"
        else:
            on, off = {args.setting: "true"}, {args.setting: "false"}
            sides = {f"{args.setting}=true": (on, REPO_ROOT), f"{args.setting}=false": (off, REPO_ROOT)}
            what = f"{args.setting} on against off"
        servers: dict[str, Server] = {}
        for i, (name, (env, root)) in enumerate(sides.items()):
            # One at a time: the first starts the embedded Postgres, the second joins it.
            server = Server(data_dir, root=root, settings=env, DB_SCHEMA=f"tail_{i}", DB_TIMEOUT_S="30")
            stack.callback(server.stop)
            server.wait_ready(600)
            servers[name] = server
        for server in servers.values():
            server.settle()
            first = httpx.post(f"{server.url}/ask", content=body, headers={"content-type": "application/json"})
            again = httpx.post(f"{server.url}/ask", content=body, headers={"content-type": "application/json"})
            if first.status_code != 200 or not again.json().get("cached"):
                raise RuntimeError(f"{server.url}: the question was not cached ({again.text[:200]})")
            wrk(server.url, 8, 2, script, body)  # warms the connections and the pool
        results = [Side(name) for name in servers]
        for r in range(args.rounds):
            for c in args.concurrency:
                order = results if r % 2 == 0 else list(reversed(results))
                for side in order:
                    hit = wrk(servers[side.name].url, c, args.seconds, script, body)
                    side.runs.setdefault(c, []).append(hit)
                    load = " / ".join(f"{x:.2f}" for x in os.getloadavg())
                    print(
                        f"round {r} c={c} {side.name}: {hit.rps:,.0f} req/s, p50 {hit.p50_ms:.1f} ms,"
                        f" p99 {hit.p99_ms:.1f} ms, p99.9 {hit.p999_ms:.1f} ms, errors {hit.errors} (load {load})",
                        flush=True,
                    )
    return results, what


def report(sides: Sequence[Side], what: str, args: argparse.Namespace) -> str:
    a, b = sides
    rows = []
    for c in args.concurrency:
        for side in sides:
            rows.append(
                [
                    str(c),
                    side.name,
                    f"{side.median(c, 'rps'):,.0f}",
                    f"{side.median(c, 'p50_ms'):.1f}",
                    f"{side.median(c, 'p99_ms'):.1f}",
                    f"{side.median(c, 'p999_ms'):.1f}",
                    f"{max(r.max_ms for r in side.runs[c]):.0f}",
                    str(sum(r.errors for r in side.runs[c])),
                ]
            )
        pairs = list(zip(a.runs[c], b.runs[c], strict=True))
        rps = statistics.median(x.rps / y.rps for x, y in pairs)
        p99 = statistics.median(x.p99_ms / y.p99_ms for x, y in pairs)
        p999 = statistics.median(x.p999_ms / y.p999_ms for x, y in pairs)
        rows.append([str(c), "**ratio** (median of rounds)", f"{rps:.2f}x", "", f"{p99:.2f}x", f"{p999:.2f}x", "", ""])
    lines = [
        BEGIN,
        "## Cached /ask under load, with its tails (bench/cached_tail.py)",
        "",
        f"{what}: wrk for {args.seconds:g} s at each concurrency against each side, {args.rounds} interleaved "
        f"rounds (the order swapped every round), medians over the rounds; max is the worst single request of "
        f"all rounds. {machine()}. Load average after: {' / '.join(f'{x:.2f}' for x in os.getloadavg())}.",
        "",
        *table(("c", "side", "req/s", "p50 ms", "p99 ms", "p99.9 ms", "max ms", "errors"), "rlrrrrrr", rows),
        END,
    ]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--setting", default="FEEDBACK_ENABLED", help="a boolean setting: on against off")
    parser.add_argument("--base", default=None, help="a commit to compare this checkout against instead")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--concurrency", type=lambda s: [int(x) for x in s.split(",")], default=[1, 8, 32])
    parser.add_argument("--no-write", action="store_true")
    args = parser.parse_args(argv)
    if shutil.which("wrk") is None:
        parser.error("wrk is not installed: `make wrk` installs Debian's package")
    from provenance.store.embedded_pg import start_embedded, stop_embedded

    data_dir = Path(tempfile.mkdtemp(prefix="provenance-cached-tail-"))
    try:
        start_embedded(data_dir / "pg")  # held by this process, joined by both servers
        sides, what = run(args, data_dir)
    finally:
        stop_embedded(data_dir / "pg")
        shutil.rmtree(data_dir, ignore_errors=True)
    section = report(sides, what, args)
    print(section)
    if not args.no_write:
        write_section(DOC, BEGIN, END, section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
