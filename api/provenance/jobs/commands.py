"""`provenance worker`: ingest workers outside the server, on the same queue, so several replicas (or a machine
of their own) share the ingest jobs; `provenance serve` runs its own too (INGEST_WORKERS)."""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import sys
from pathlib import Path
from typing import Any

from provenance.inference.embedder import Embedder
from provenance.ingest.memory import bound_allocator
from provenance.ingest.sync import sync_folder
from provenance.jobs.priority import lower_process
from provenance.jobs.queue import LEASE_S, JobProgress, JobStore
from provenance.jobs.worker import POLL_S, Worker
from provenance.logs import configure_logging
from provenance.services import load_embedder
from provenance.settings import Settings, load_settings
from provenance.store.corpora import CorpusStore
from provenance.store.pool import create_pool, migrate, resolve_database_url
from provenance.store.sources import SourceStore

# A `provenance ingest` job's holder: this prefix, the host's name and the command's pid.
LOCAL_PREFIX = "ingest-"


def add_worker_parser(sub: Any) -> None:
    worker = sub.add_parser("worker", help="take ingest jobs (uploads, removals) from the queue in Postgres")
    worker.add_argument("--workers", type=int, default=1, help="jobs run at once, each of another corpus (default 1)")
    worker.add_argument("--threads", type=int, default=None, help="embedding threads per job (default: EMBED_THREADS)")
    worker.add_argument("--once", action="store_true", help="run the jobs queued now, then stop")
    worker.set_defaults(func=cmd_worker)


def cmd_worker(args: argparse.Namespace) -> int:
    settings = load_settings()
    configure_logging(settings.server.log_level)
    if args.workers < 1 or (args.threads is not None and args.threads < 1):
        print("error: --workers and --threads must be at least 1", file=sys.stderr)
        return 2
    # A process of its own that only ingests: bounded as `provenance ingest` is, and below the API on the CPU.
    bound_allocator()
    lower_process(settings.ingest.nice)
    return asyncio.run(work(settings, args.workers, args.threads or settings.embedding.threads, once=args.once))


async def work(settings: Settings, workers: int, threads: int, *, once: bool = False) -> int:
    """Run `workers` workers on the queue until stopped; with `once`, until the queue has nothing for them."""
    pool = await create_pool(resolve_database_url(settings), settings)
    try:
        await migrate(pool)

        def embedder() -> Embedder:
            return load_embedder(settings, for_ingest=True, threads=threads)

        # Each its own embedder (kept warm between its jobs): two jobs at once don't share one session.
        running = [Worker(settings, pool, embedder) for _ in range(workers)]
        if once:
            await asyncio.gather(*(_drain(w) for w in running))
        else:
            print(f"ingest workers: {', '.join(w.name for w in running)}", file=sys.stderr, flush=True)
            await asyncio.gather(*(w.run() for w in running))
    finally:
        await pool.close()
    return 0


async def ingest_folder(
    settings: Settings, pool: Any, directory: Path, *, corpus: str, force: bool = False, replace: bool = False
) -> str:
    """`provenance ingest DIR --corpus C`: the folder synced as the corpus's folder source (ingest.sync), in the
    corpus's one job slot, which it waits for while an upload's or a removal's job of the corpus runs."""
    jobs = JobStore(pool)
    name = f"{LOCAL_PREFIX}{socket.gethostname()}-{os.getpid()}"
    payload = {"folder": str(directory.resolve())}
    waited = False
    while (job := await jobs.start_local(corpus, payload, name, stopped=stopped_here)) is None:
        if not waited:
            print(f"waiting for corpus {corpus}'s running ingest job to end", file=sys.stderr, flush=True)
            waited = True
        await asyncio.sleep(POLL_S)
    beating = asyncio.create_task(_keep(jobs, job.id, name))
    try:
        report = await sync_folder(
            CorpusStore(pool),
            SourceStore(pool),
            directory,
            lambda: load_embedder(settings, for_ingest=True),
            settings.embedding.model,
            settings.ingest.chunk_max_tokens,
            settings.retrieval.hnsw_min_passages,
            corpus=corpus,
            force=force,
            replace=replace,
        )
    except BaseException as exc:
        beating.cancel()
        await jobs.finish(job.id, name, "failed", [], error=str(exc) or type(exc).__name__)
        raise
    beating.cancel()
    outcomes = [{"fileName": n, "status": "failed", "reason": why} for n, why in report.skipped_files]
    progress = JobProgress(documents=report.files, passages=report.passages, embedded=report.embedded, phase="done")
    await jobs.finish(job.id, name, "done", outcomes, progress=progress.wire())
    return report.summary()


def stopped_here(holder: str) -> bool:
    """Whether a job's holder is a `provenance ingest` of this machine whose process is gone (killed): its job
    is then released at once, not after the lease. A pid taken since by another process reads as alive, and
    the lease frees the job instead."""
    host, _, pid = holder.removeprefix(LOCAL_PREFIX).rpartition("-")
    if not holder.startswith(LOCAL_PREFIX) or host != socket.gethostname() or not pid.isdigit():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


async def _keep(jobs: JobStore, job_id: str, worker: str) -> None:
    while True:
        await asyncio.sleep(LEASE_S / 4)
        await jobs.heartbeat(job_id, worker, {})


async def _drain(worker: Worker) -> None:
    while await worker.run_once():
        pass
