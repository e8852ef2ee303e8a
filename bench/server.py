"""A real `provenance serve` subprocess on embedded Postgres, a loopback load generator, and memory and CPU
sampling of the server's processes. Shared by `bench/run.py` and `bench/scaling.py`."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import httpx
import psutil

from bench.common import percentile
from provenance.inference.llm_server import free_port

REPO_ROOT = Path(__file__).resolve().parent.parent

# Settings the bench must not inherit from the caller's shell: it measures the local profile on its own
# embedded Postgres, with no bot check.
_STRIPPED = ("DATABASE_URL", "ANTHROPIC_API_KEY", "ANTHROPIC_BASE_URL", "TURNSTILE_SECRET_KEY", "PROFILE", "DB_SCHEMA")


def load_questions(buckets: Sequence[str] = ("answerable", "partial", "unanswerable")) -> list[str]:
    """The eval questions (not the adversarial ones, which the deny-list blocks in well under a millisecond)."""
    questions = []
    for line in (REPO_ROOT / "evals" / "cases.jsonl").read_text().splitlines():
        if line.strip():
            case = json.loads(line)
            if case.get("bucket") in buckets:
                questions.append(str(case["question"]))
    return questions


def postgres_pid(data_dir: Path) -> int | None:
    pidfile = data_dir / "pg" / "postmaster.pid"
    try:
        return int(pidfile.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return None


def tree(pid: int | None) -> list[psutil.Process]:
    if pid is None:
        return []
    try:
        root = psutil.Process(pid)
        return [root, *root.children(recursive=True)]
    except psutil.NoSuchProcess:
        return []


def rss_mib(processes: Sequence[psutil.Process]) -> float:
    total = 0
    for p in processes:
        try:
            total += p.memory_info().rss
        except psutil.NoSuchProcess:
            continue
    return total / 2**20


def cpu_s(processes: Sequence[psutil.Process]) -> float:
    total = 0.0
    for p in processes:
        try:
            t = p.cpu_times()
            total += t.user + t.system
        except psutil.NoSuchProcess:
            continue
    return total


def bench_environ(**env: str) -> dict[str, str]:
    """This process's environment without the settings the bench must not inherit, plus `env`."""
    environ = {k: v for k, v in os.environ.items() if k not in _STRIPPED}
    environ.update(env)
    return environ


def stop_process(proc: subprocess.Popen[bytes], log: IO[str]) -> None:
    """Stop a uvicorn process as Ctrl-C does (it and its workers shut down), killing it if it won't."""
    if proc.poll() is None:
        proc.send_signal(signal.SIGINT)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)
    log.close()


class Server:
    """`provenance serve` as a subprocess: it starts (or joins) the embedded Postgres under `data_dir`."""

    def __init__(
        self,
        data_dir: Path,
        *,
        workers: int = 1,
        ingest: bool = True,
        serve_args: Sequence[str] = (),
        root: Path = REPO_ROOT,
        settings: Mapping[str, str] | None = None,
        **env: str,
    ) -> None:
        self.data_dir = data_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        environ = bench_environ(
            DATA_DIR=str(data_dir),
            CORPUS_DIR=str(root / "corpus"),
            # The checkout at `root`, whichever one the virtualenv's editable install points at (a base commit
            # in bench/cached_tail.py, or a git worktree).
            PYTHONPATH=os.pathsep.join([str(root / "api"), str(root)]),
            PROFILE="local",
            LOG_LEVEL="warning",
            RATE_LIMIT_PER_HOUR="0",
            RATE_LIMIT_PER_HOUR_API_KEY="0",
            # Latency and throughput under load, not admission control: every request waits its turn
            # (docs/reliability.md measures the overload answers).
            ASK_QUEUE_MAX="256",
            ASK_QUEUE_TIMEOUT_S="120",
        )
        environ.update(env)  # the caller's settings win over the bench defaults above (bench/soak.py)
        environ.update(settings or {})  # the same, for names chosen at run time (bench/cached_tail.py)
        cmd = [
            sys.executable,
            "-m",
            "provenance",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--workers",
            str(workers),
            *serve_args,
        ]
        if ingest:
            cmd.append("--ingest")
        self.log = (data_dir / f"server-{self.port}.log").open("w")
        self.proc = subprocess.Popen(cmd, env=environ, cwd=root, stdout=self.log, stderr=subprocess.STDOUT)
        self.workers = workers

    def wait_ready(self, timeout_s: float = 240) -> None:
        deadline = time.monotonic() + timeout_s
        ready = 0
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the server exited ({self.proc.returncode}):\n{self.log_tail()}")
            try:
                body = httpx.get(f"{self.url}/healthz", timeout=5).json()
                if body.get("passages"):
                    ready += 1
                    # With several workers, each must have started; a few answers in a row say so.
                    if ready >= 3 * self.workers:
                        return
                    continue
            except (httpx.HTTPError, ValueError):
                pass
            time.sleep(0.25)
        raise RuntimeError(f"the server did not become ready in {timeout_s:.0f} s:\n{self.log_tail()}")

    def log_tail(self, lines: int = 30) -> str:
        self.log.flush()
        return "\n".join(Path(self.log.name).read_text(errors="replace").splitlines()[-lines:])

    def settle(self, timeout_s: float = 90, quiet_s: float = 2.0) -> None:
        """Wait until the server's processes are idle (workers still loading models would skew a run)."""
        deadline = time.monotonic() + timeout_s
        quiet_since: float | None = None
        last = cpu_s(self.processes())
        while time.monotonic() < deadline:
            time.sleep(0.5)
            now = cpu_s(self.processes())
            if now - last < 0.05:  # under 10% of one core over the half second
                quiet_since = quiet_since or time.monotonic()
                if time.monotonic() - quiet_since >= quiet_s:
                    return
            else:
                quiet_since = None
            last = now

    def processes(self) -> list[psutil.Process]:
        return tree(self.proc.pid)

    def stop(self) -> None:
        stop_process(self.proc, self.log)

    def __enter__(self) -> Server:
        try:
            self.wait_ready()
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


class Sampler:
    """Samples RSS of the server's process tree and of Postgres (postmaster and backends) in a thread."""

    def __init__(self, server: Server, interval_s: float = 0.25) -> None:
        self.server = server
        self.interval_s = interval_s
        self.peak_server_mib = 0.0
        self.peak_pg_mib = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.sample()
            self._stop.wait(self.interval_s)

    def sample(self) -> None:
        self.peak_server_mib = max(self.peak_server_mib, rss_mib(self.server.processes()))
        self.peak_pg_mib = max(self.peak_pg_mib, rss_mib(tree(postgres_pid(self.server.data_dir))))

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.sample()


@dataclass
class LoadResult:
    concurrency: int
    requests: int
    wall_s: float
    round_trip_ms: list[float]
    bodies: list[dict[str, Any]]
    errors: int = 0
    cpu: dict[str, float] = field(default_factory=dict)  # CPU seconds per process group during the load

    @property
    def throughput(self) -> float:
        return len(self.bodies) / self.wall_s if self.wall_s else 0.0

    def rt(self, q: float) -> float:
        return percentile(self.round_trip_ms, q)

    def server_ms(self, q: float) -> float:
        return percentile([b["totalMs"] for b in self.bodies], q)

    def statuses(self) -> dict[str, int]:
        counts: dict[str, int] = {}
        for b in self.bodies:
            counts[b["status"]] = counts.get(b["status"], 0) + 1
        return counts


async def load(url: str, questions: Sequence[str], concurrency: int, requests: int, offset: int = 0) -> LoadResult:
    """`requests` POST /ask from `concurrency` clients over keep-alive connections, questions in turn."""
    latencies: list[float] = []
    bodies: list[dict[str, Any]] = []
    errors = 0
    counter = iter(range(requests))
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=url, timeout=120, limits=limits) as client:

        async def worker() -> None:
            nonlocal errors
            for i in counter:
                question = questions[(offset + i) % len(questions)]
                started = time.perf_counter()
                r = await client.post("/ask", json={"question": question})
                elapsed = (time.perf_counter() - started) * 1000
                if r.status_code != 200:
                    errors += 1
                    continue
                latencies.append(elapsed)
                bodies.append(r.json())

        started = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        wall = time.perf_counter() - started
    return LoadResult(concurrency, requests, wall, latencies, bodies, errors)


def measured_load(
    server: Server, questions: Sequence[str], concurrency: int, requests: int, offset: int = 0
) -> LoadResult:
    """`load`, with the CPU seconds the server, Postgres and this process (the load generator) used."""
    me = [psutil.Process()]
    before = {
        "server": cpu_s(server.processes()),
        "postgres": cpu_s(tree(postgres_pid(server.data_dir))),
        "client": cpu_s(me),
    }
    cpu_before = psutil.cpu_times()
    started = time.perf_counter()
    result = asyncio.run(load(server.url, questions, concurrency, requests, offset))
    window_s = time.perf_counter() - started
    cpu_after = psutil.cpu_times()
    result.cpu = {
        "server": cpu_s(server.processes()) - before["server"],
        # Backends that started during the run count from zero: an underestimate only by those that exited.
        "postgres": cpu_s(tree(postgres_pid(server.data_dir))) - before["postgres"],
        "client": cpu_s(me) - before["client"],
        "machine_busy": _busy(cpu_before, cpu_after),
        "window_s": window_s,
    }
    result.cpu["others"] = max(
        0.0, result.cpu["machine_busy"] - result.cpu["server"] - result.cpu["postgres"] - result.cpu["client"]
    )
    return result


def _busy(before: Any, after: Any) -> float:
    """CPU seconds the whole machine was busy (everyone's work, other users' included)."""
    fields = ("user", "nice", "system", "irq", "softirq", "steal")  # guest time is already inside user
    return float(sum(getattr(after, f, 0.0) - getattr(before, f, 0.0) for f in fields))
