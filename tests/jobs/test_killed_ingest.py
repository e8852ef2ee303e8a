"""A `provenance ingest` killed mid-way, against a real Postgres and the real embedder: its job slot is freed
without any worker, by the next run of the command, which resumes from what the killed one staged, nothing lost
and nothing twice; a worker's job whose heartbeat lapsed goes back to the queue with its files; a worker that
takes over a stopped command's job fails it rather than run a folder it can't see. And the worker's fixed
latencies: its embedder kept between jobs, and its wait for the next poll cut short when this process queues
a job."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from provenance.jobs import worker as worker_module
from provenance.jobs.commands import LOCAL_PREFIX, ingest_folder, stopped_here
from provenance.jobs.queue import LOCAL_STOPPED, JobStore
from provenance.jobs.worker import WarmEmbedder, Worker
from provenance.services import load_embedder
from provenance.settings import Settings
from provenance.store.sources import SourceStore
from tests.jobs.test_worker import handbook, staged
from tests.reliability.support import migrated_schema


@pytest_asyncio.fixture(loop_scope="session")
async def queue_db(pg_dsn: str, data_dir: Path) -> AsyncIterator[tuple[Settings, object]]:
    async with migrated_schema(pg_dsn, data_dir, ingest_threads=1, embed_threads=1) as db:
        yield db


async def jobs_of(pool: object, corpus: str) -> list[tuple[str, str, str | None, str | None]]:
    async with pool.acquire() as conn:  # type: ignore[attr-defined]
        rows = await conn.fetch(
            "SELECT id, state, worker, error FROM ingest_jobs WHERE corpus = $1 ORDER BY created_at", corpus
        )
    return [(r["id"], r["state"], r["worker"], r["error"]) for r in rows]


async def test_a_killed_ingest_is_resumed_by_the_next_run_without_a_worker_nothing_lost_or_twice(
    queue_db: tuple[Settings, object], tmp_path: Path
) -> None:
    settings, pool = queue_db
    folder = tmp_path / "manual"
    folder.mkdir()
    (folder / "manual.md").write_bytes(handbook(150, "travel"))
    (folder / "rooms.md").write_bytes(handbook(3, "rooms"))
    env = {
        **os.environ,
        "DATABASE_URL": settings.database.url or "",
        "DB_SCHEMA": settings.database.schema,
        "DATA_DIR": str(settings.data_dir),
        "LOG_LEVEL": "warning",
        "EMBED_THREADS": "1",
    }
    command = [sys.executable, "-m", "provenance", "ingest", str(folder), "--corpus", "manual"]
    process = await asyncio.create_subprocess_exec(
        *command, env=env, stdout=asyncio.subprocess.DEVNULL, stderr=asyncio.subprocess.DEVNULL
    )
    try:
        deadline = time.monotonic() + 300
        while await staged(pool, "manual") < 64:  # one window of passages staged, more to come
            assert time.monotonic() < deadline and process.returncode is None, "the first ingest staged nothing"
            await asyncio.sleep(0.05)
    finally:
        process.send_signal(signal.SIGKILL)  # no handler runs: its job stays `running`, as after a power cut
        await process.wait()
    [(killed_id, state, holder, _)] = await jobs_of(pool, "manual")
    assert state == "running" and holder == f"{LOCAL_PREFIX}{os.uname().nodename}-{process.pid}"
    assert stopped_here(holder or "")
    already = await staged(pool, "manual")

    # The next run, with no worker anywhere: it would wait for the killed one's slot forever before.
    await asyncio.wait_for(ingest_folder(settings, pool, folder, corpus="manual"), timeout=600)
    [killed, resumed] = await jobs_of(pool, "manual")
    assert killed == (killed_id, "failed", holder, LOCAL_STOPPED)
    assert resumed[1] == "done"
    async with pool.acquire() as conn:  # type: ignore[attr-defined]
        job = await conn.fetchrow("SELECT progress::text AS p FROM ingest_jobs WHERE id = $1", resumed[0])
        ids = [r["id"] for r in await conn.fetch("SELECT id FROM passages WHERE corpus = 'manual'")]
        left = await conn.fetchval("SELECT count(*) FROM staged_passages WHERE corpus = 'manual'")
    progress = json.loads(job["p"])
    # Every section of both files is served once: 150 + 3 rules, and nothing twice.
    assert len(ids) == len(set(ids)) == progress["passages"]
    assert sum(1 for i in ids if i.startswith("manual.md#")) >= 150
    assert sum(1 for i in ids if i.startswith("rooms.md#")) >= 3
    # What the killed run staged was not embedded again, and the staging area was emptied by the switch.
    assert progress["embedded"] <= len(ids) - already < len(ids)
    assert left == 0
    docs = await SourceStore(pool).documents("manual")  # type: ignore[arg-type]
    assert sorted(d.path for d in docs) == ["manual.md", "rooms.md"]


async def test_a_live_holder_keeps_its_slot_and_a_lapsed_workers_job_goes_back_to_the_queue_with_its_files(
    queue_db: tuple[Settings, object],
) -> None:
    _, pool = queue_db
    jobs = JobStore(pool)  # type: ignore[arg-type]
    me = f"{LOCAL_PREFIX}{os.uname().nodename}-{os.getpid()}"
    held = await jobs.start_local("live", {"folder": "/x"}, me)
    assert held is not None and not stopped_here(me)
    # A live command of this machine, within its lease: the next run waits.
    assert await jobs.start_local("live", {"folder": "/x"}, "ingest-other-1", stopped=stopped_here) is None

    upload = await jobs.enqueue_upload("lapsed", [("a.md", b"# A\n\nA text.\n")], "editor")
    assert (await jobs.claim("stalled-worker")) is not None
    assert await jobs.start_local("lapsed", {"folder": "/y"}, "ingest-cli-2") is None
    async with pool.acquire() as conn:  # type: ignore[attr-defined]
        await conn.execute(
            "UPDATE ingest_jobs SET heartbeat_at = now() - interval '5 minutes' WHERE id = $1",
            upload.id,
        )
    local = await jobs.start_local("lapsed", {"folder": "/y"}, "ingest-cli-2")
    assert local is not None and local.state == "running"
    back = await jobs.get(upload.id)
    assert back is not None and back.state == "queued" and back.worker is None
    assert await jobs.uploads(upload.id) == [("a.md", b"# A\n\nA text.\n")]
    # The stalled worker, were it only paused, has lost the job.
    assert not await jobs.heartbeat(upload.id, "stalled-worker", {})
    # It waits for the command's job, then any worker takes it again.
    assert await jobs.claim("w2", only=upload.id) is None
    assert await jobs.finish(local.id, "ingest-cli-2", "done", [])
    again = await jobs.claim("w2", only=upload.id)
    assert again is not None and again.attempts == 2


async def test_a_worker_that_takes_over_a_stopped_commands_job_fails_it_and_frees_the_corpus(
    queue_db: tuple[Settings, object],
) -> None:
    settings, pool = queue_db
    jobs = JobStore(pool)  # type: ignore[arg-type]
    local = await jobs.start_local("elsewhere", {"folder": "/on/another/machine"}, "ingest-gone-7")
    assert local is not None
    queued = await jobs.enqueue_upload("elsewhere", [("b.md", b"# B\n\nB text.\n")], "editor")
    async with pool.acquire() as conn:  # type: ignore[attr-defined]
        await conn.execute("UPDATE ingest_jobs SET heartbeat_at = now() - interval '5 minutes' WHERE id = $1", local.id)
    worker = Worker(settings, pool, lambda: load_embedder(settings, for_ingest=True, threads=1), name="w")
    assert await worker.run_once()
    failed = await jobs.get(local.id)
    assert failed is not None and failed.state == "failed" and failed.error == LOCAL_STOPPED
    # The corpus's slot is free: the upload queued behind it runs next.
    assert await worker.run_once()
    done = await jobs.get(queued.id)
    assert done is not None and done.state == "done" and [d["status"] for d in done.documents] == ["added"]


def test_a_workers_embedder_is_kept_for_the_next_job_within_its_time_and_dropped_after() -> None:
    loads: list[object] = []

    def factory() -> object:
        loads.append(object())
        return loads[-1]

    warm = WarmEmbedder(factory)  # type: ignore[arg-type]
    first = warm()
    warm.touch()
    assert warm() is first and len(loads) == 1
    warm.KEEP_S = 0.0
    time.sleep(0.01)
    warm.drop_idle()
    assert warm._kept is None
    assert warm() is not first and len(loads) == 2


async def test_a_woken_worker_looks_at_the_queue_before_its_poll(
    queue_db: tuple[Settings, object], monkeypatch: pytest.MonkeyPatch
) -> None:
    settings, pool = queue_db
    monkeypatch.setattr(worker_module, "POLL_S", 3600.0)
    idle = Worker(settings, pool, lambda: load_embedder(settings, for_ingest=True, threads=1), name="idle")
    waiting = asyncio.create_task(idle._idle())
    await asyncio.sleep(0.1)
    assert not waiting.done()
    idle.wake()
    # Without the wake this would wait the hour's poll out and fail here.
    await asyncio.wait_for(waiting, timeout=60)
