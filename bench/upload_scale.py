"""Issue 45's targets for uploads, against real processes on one embedded Postgres:

- throughput: the same files ingested by `provenance ingest DIR` and uploaded through the API (20 files a
  request, UPLOAD_MAX_FILES, to a `provenance serve` with INGEST_WORKERS=0 and a `provenance worker` process),
  each into a fresh schema, the two interleaved (A B, then B A) so that the shared machine's load falls on
  both; both with 2 embedding threads (EMBED_THREADS for the command, `--threads` for the worker). The
  worker's and the command's peak RSS are sampled.
- `/ask` while a job runs: a server over corpus/ (INGEST_WORKERS=1, INGEST_THREADS as set or `--ingest-threads`),
  cached and uncached questions idle, while an upload's job runs, and idle again; the ratios come from that run.

    .venv/bin/python -m bench.upload_scale [--files N] [--asks-only | --throughput-only] [--no-write]

Files: the 18F handbook's pages (/work/shared/corpora/18f-handbook/pages), the first N by path, flattened to
one folder (`a/b.md` -> `a__b.md`) so that both sides ingest the same names and bytes.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

from bench.common import embedded_data_dir, machine, percentile, write_section
from bench.server import REPO_ROOT, Server, bench_environ, load_questions, rss_mib, stop_process, tree
from provenance.access.store import AccessStore
from provenance.guards.apikeys import create_key
from provenance.settings import load_settings
from provenance.store.pool import create_pool, migrate, resolve_database_url

HANDBOOK = Path("/work/shared/corpora/18f-handbook/pages")
BEGIN, END = "<!-- bench:upload_scale -->", "<!-- /bench:upload_scale -->"
SUFFIXES = {".md", ".markdown", ".txt", ".html", ".htm"}
PER_REQUEST = 20


def flat_copy(n: int, out: Path) -> list[Path]:
    files = sorted(p for p in HANDBOOK.rglob("*") if p.is_file() and p.suffix.lower() in SUFFIXES)[:n]
    out.mkdir(parents=True, exist_ok=True)
    for p in files:
        shutil.copyfile(p, out / "__".join(p.relative_to(HANDBOOK).parts))
    return sorted(out.iterdir())


class Peak:
    """The peak RSS of a process tree, sampled every 0.2 s in a thread."""

    def __init__(self, pid: int) -> None:
        self.pid, self.mib = pid, 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self.mib = max(self.mib, rss_mib(tree(self.pid)))
            self._stop.wait(0.2)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join(timeout=5)
        return self.mib


async def _schema_with_key() -> tuple[str, str]:
    settings = load_settings().with_overrides(db_schema=f"bench_{uuid.uuid4().hex[:8]}", log_level="warning")
    pool = await create_pool(resolve_database_url(settings), settings)
    try:
        await migrate(pool)
        return settings.database.schema, str(await create_key(AccessStore(pool), "bench", "admin"))
    finally:
        await pool.close()


def env_for(schema: str, **more: str) -> dict[str, str]:
    return bench_environ(
        DATA_DIR=os.environ["DATA_DIR"],
        DB_SCHEMA=schema,
        PYTHONPATH=os.pathsep.join([str(REPO_ROOT / "api"), str(REPO_ROOT)]),
        LOG_LEVEL="warning",
        **more,
    )


def cli_run(folder: Path) -> dict[str, float]:
    schema, _ = asyncio.run(_schema_with_key())
    cmd = [sys.executable, "-m", "provenance", "ingest", str(folder), "--corpus", "hb"]
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, env=env_for(schema, EMBED_THREADS="2"), stdout=subprocess.DEVNULL)
    peak = Peak(proc.pid)
    assert proc.wait() == 0
    return {"s": time.perf_counter() - started, "peak_mib": peak.stop()}


def wait_up(server: Server, timeout_s: float = 300) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if server.proc.poll() is not None:
            raise RuntimeError(server.log_tail())
        try:
            if httpx.get(f"{server.url}/healthz", timeout=5).status_code < 500:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.25)
    raise RuntimeError(server.log_tail())


def api_run(folder: Path, data_dir: Path) -> dict[str, float]:
    """The files uploaded 20 a request; timed from the first request to the last job done. The worker
    process starts before the clock (its imports; its model loads in each job, as the command's does)."""
    schema, key = asyncio.run(_schema_with_key())
    server = Server(data_dir, ingest=False, DB_SCHEMA=schema, INGEST_WORKERS="0", UPLOAD_RATE_PER_HOUR="0")
    log = (data_dir / f"worker-{schema}.log").open("w")
    worker = subprocess.Popen(
        [sys.executable, "-m", "provenance", "worker", "--threads", "2"],
        env=env_for(schema), stdout=log, stderr=subprocess.STDOUT,
    )  # fmt: skip
    try:
        wait_up(server)
        peak = Peak(worker.pid)
        files = sorted(folder.iterdir())
        headers = {"Authorization": f"Bearer {key}"}
        with httpx.Client(base_url=server.url, headers=headers, timeout=300) as client:
            assert client.post("/corpora", json={"name": "hb", "visibility": "public"}).status_code == 201
            started = time.perf_counter()
            jobs = []
            for i in range(0, len(files), PER_REQUEST):
                batch = [("files", (p.name, p.read_bytes(), "text/plain")) for p in files[i : i + PER_REQUEST]]
                r = client.post("/corpora/hb/documents", files=batch)
                assert r.status_code == 202, r.text
                jobs.append(r.json()["jobId"])
            for job in jobs:
                while (state := client.get(f"/jobs/{job}").json())["state"] not in ("done", "failed"):
                    time.sleep(0.2)
                assert state["state"] == "done", state
            elapsed = time.perf_counter() - started
            added = sum(1 for j in jobs for d in client.get(f"/jobs/{j}").json()["documents"] if d["status"] == "added")
        return {"s": elapsed, "peak_mib": peak.stop(), "added": float(added), "jobs": float(len(jobs))}
    finally:
        stop_process(worker, log)
        server.stop()


def throughput(n: int, data_dir: Path, pairs: int = 2) -> dict[str, Any]:
    """`pairs` runs of each side, interleaved: CLI API, then API CLI, and so on."""
    folder = Path(tempfile.mkdtemp(prefix="bench-18f-"))
    files = flat_copy(n, folder)
    runs: dict[str, list[dict[str, float]]] = {"cli": [], "api": []}
    for order in [("cli", "api") if k % 2 == 0 else ("api", "cli") for k in range(pairs)]:
        for side in order:
            print(f"{side} of {len(files)} files, load {os.getloadavg()[0]:.1f}", file=sys.stderr, flush=True)
            runs[side].append(cli_run(folder) if side == "cli" else api_run(folder, data_dir))
            print(f"  {runs[side][-1]}", file=sys.stderr, flush=True)
    size = sum(p.stat().st_size for p in files)
    shutil.rmtree(folder, ignore_errors=True)
    return {"files": len(files), "bytes": size, **runs}


def _asks(url: str, questions: list[str], tag: str, still: Any, *, rounds: int = 1) -> tuple[list[float], list[float]]:
    """Cached (questions asked before, again) and uncached (each question made new by a tag) round trips in
    ms, alternating; a sample counts only while `still()` holds before and after it. Up to `rounds` passes
    over the questions, while `still()` holds: a job's whole run gives its p99 a few hundred samples."""
    cached: list[float] = []
    uncached: list[float] = []
    with httpx.Client(base_url=url, timeout=300) as client:
        for n, (i, q) in enumerate((i, q) for _ in range(rounds) for i, q in enumerate(questions)):
            if n >= len(questions) and not still():
                break
            for j in range(8):
                ok = still()
                started = time.perf_counter()
                r = client.post("/ask", json={"question": questions[(i + j) % 10]})
                if ok and still() and r.status_code == 200 and r.json().get("cached"):
                    cached.append((time.perf_counter() - started) * 1000)
            ok = still()
            started = time.perf_counter()
            r = client.post("/ask", json={"question": f"{q} (ref {tag}{n})"})
            if ok and still() and r.status_code == 200 and not r.json().get("cached"):
                uncached.append((time.perf_counter() - started) * 1000)
    return cached, uncached


def asks_under_job(data_dir: Path, n_files: int, threads: int) -> dict[str, Any]:
    questions = load_questions(("answerable",))[:12]
    server = Server(data_dir, INGEST_WORKERS="1", INGEST_THREADS=str(threads), UPLOAD_RATE_PER_HOUR="0")
    try:
        server.wait_ready()
        server.settle()
        key = asyncio.run(_key_in("public"))
        with httpx.Client(base_url=server.url, timeout=300) as client:
            for q in questions[:10]:
                client.post("/ask", json={"question": q})  # the cached set, warmed
        always = lambda: True  # noqa: E731
        # Idle as many samples as busy, about: five passes before the job and five after.
        idle1 = _asks(server.url, questions, "a", always, rounds=5)
        folder = Path(tempfile.mkdtemp(prefix="bench-18f-job-"))
        files = flat_copy(n_files, folder)
        headers = {"Authorization": f"Bearer {key}"}
        with httpx.Client(base_url=server.url, headers=headers, timeout=300) as client:
            client.post("/corpora", json={"name": "busy", "visibility": "public"})
            r = client.post(
                "/corpora/busy/documents",
                files=[("files", (p.name, p.read_bytes(), "text/plain")) for p in files[:PER_REQUEST]],
            )
            job = r.json()["jobId"]
            while client.get(f"/jobs/{job}").json()["state"] != "running":
                time.sleep(0.1)

            def running() -> bool:
                return bool(client.get(f"/jobs/{job}").json()["state"] == "running")

            busy = _asks(server.url, questions, "b", running, rounds=20)
            while client.get(f"/jobs/{job}").json()["state"] == "running":
                time.sleep(0.5)
        shutil.rmtree(folder, ignore_errors=True)
        idle2 = _asks(server.url, questions, "c", always, rounds=5)
        return {"idle": (idle1[0] + idle2[0], idle1[1] + idle2[1]), "busy": busy}
    finally:
        server.stop()


async def _key_in(schema: str) -> str:
    settings = load_settings().with_overrides(db_schema=schema, log_level="warning")
    pool = await create_pool(resolve_database_url(settings), settings)
    try:
        return str(await create_key(AccessStore(pool), f"bench-{uuid.uuid4().hex[:6]}", "admin"))
    finally:
        await pool.close()


def _ratio_rows(asks: dict[str, Any]) -> str:
    (ic, iu), (bc, bu) = asks["idle"], asks["busy"]
    return (
        f"| cached `/ask` p50 / p99 | {percentile(ic, 0.5):.1f} / {percentile(ic, 0.99):.1f} ms"
        f" ({len(ic)}) | {percentile(bc, 0.5):.1f} / {percentile(bc, 0.99):.1f} ms ({len(bc)})"
        f" | p99 {percentile(bc, 0.99) / max(percentile(ic, 0.99), 1e-9):.2f}x (target <= 2x) |\n"
        f"| uncached `/ask` p50 / p99 | {percentile(iu, 0.5):.0f} / {percentile(iu, 0.99):.0f} ms ({len(iu)})"
        f" | {percentile(bu, 0.5):.0f} / {percentile(bu, 0.99):.0f} ms ({len(bu)})"
        f" | p50 {percentile(bu, 0.5) / max(percentile(iu, 0.5), 1e-9):.2f}x (target <= 1.5x) |"
    )


def section(tp: dict[str, Any] | None, asks: dict[str, Any] | None, load: str, threads: int) -> str:
    parts = [f"{BEGIN}\n## Uploads at scale (bench/upload_scale.py)\n"]
    parts.append(
        f"On {machine()}, load average {load} at the start. Ratios come from one run (`/ask`: idle before and"
        " after the job, against while it runs) or from interleaved runs (throughput), so that what else the"
        " machine ran fell on both sides.\n"
    )
    if tp is not None:
        cli = [r["s"] for r in tp["cli"]]
        api = [r["s"] for r in tp["api"]]
        ratios = [c / a for c, a in zip(cli, api, strict=True)]
        parts.append(
            f"\n**API upload against `provenance ingest`**, {tp['files']} files of the 18F handbook"
            f" ({tp['bytes'] / 1000:.0f} KB{'' if tp['files'] >= 246 else ', the first by path'}), each run into a"
            " fresh schema, interleaved (CLI API, then API CLI); both with 2 embedding threads, the API's files 20 a"
            " request to a `provenance worker`:\n\n| run | CLI | API | API throughput / CLI's |\n|---|---:|---:|---:|\n"
            + "".join(f"| {n + 1} | {c:.0f} s | {a:.0f} s | {r:.2f}x |\n" for n, (c, a, r) in enumerate(
                zip(cli, api, ratios, strict=True)))
            + f"\nMedian ratio {sorted(ratios)[len(ratios) // 2]:.2f}x (target >= 0.9x). Peak RSS: the"
            f" `provenance worker` {max(r['peak_mib'] for r in tp['api']):.0f} MiB, `provenance ingest`"
            f" {max(r['peak_mib'] for r in tp['cli']):.0f} MiB (bound 1.5 GB). The API's time runs from the first"
            " request to the last job done; the command's is its process's whole run (imports included).\n"
        )  # fmt: skip
    if asks is not None:
        parts.append(
            f"\n**`/ask` while an upload's job runs** (one server, INGEST_WORKERS=1, INGEST_THREADS={threads}; 20 files"
            " of the 18F handbook uploaded; samples kept only while the job was running, up to 20 passes over"
            " 12 questions, each pass 8 cached asks and 1 uncached a question), one client, sequential; idle is"
            " 5 passes before the job and 5 after:\n\n| | idle | job running | ratio |\n|---|---:|---:|---:|\n"
            + _ratio_rows(asks)
            + "\n"
        )
    parts.append(END)
    return "".join(parts)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--files", type=int, default=246)
    parser.add_argument("--asks-only", action="store_true")
    parser.add_argument("--throughput-only", action="store_true")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--pairs", type=int, default=2, help="throughput runs of each side, interleaved")
    parser.add_argument("--ingest-threads", type=int, default=None, help="the server's INGEST_THREADS (else as set)")
    args = parser.parse_args()
    threads = args.ingest_threads or load_settings().ingest.threads
    load = f"{os.getloadavg()[0]:.0f}"
    with embedded_data_dir("provenance-bench-scale-") as data_dir:
        tp = None if args.asks_only else throughput(args.files, data_dir, args.pairs)
        asks = None if args.throughput_only else asks_under_job(data_dir, PER_REQUEST, threads)
        # Printed before Postgres stops: a failed stop must not lose the run.
        text = section(tp, asks, load, threads)
        print(text, flush=True)
    if not args.no_write:
        write_section(REPO_ROOT / "docs" / "benchmarks.md", BEGIN, END, text)


if __name__ == "__main__":
    main()
