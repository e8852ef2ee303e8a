"""Ingest workers against a real Postgres and the real embedder: a job killed mid-way is taken over and
resumed from what it staged, two workers run two corpora's jobs at once, and `provenance worker` runs the jobs
a server with INGEST_WORKERS=0 leaves queued."""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from provenance.access.store import AccessStore
from provenance.cli import main
from provenance.guards.apikeys import create_key
from provenance.guards.ratelimit import human_duration
from provenance.jobs.commands import work
from provenance.jobs.queue import JobStore
from provenance.jobs.worker import Worker
from provenance.services import load_embedder
from provenance.settings import Settings
from provenance.store.pool import create_pool, migrate
from provenance.store.sources import SourceStore
from tests.conftest import LiveServer, make_settings
from tests.reliability.support import drop_schema, migrated_schema


def handbook(sections: int, topic: str) -> bytes:
    """A Markdown file of `sections` sections of a few distinct sentences each."""
    parts = [f"# The {topic} handbook\n"]
    for n in range(sections):
        parts.append(
            f"## {topic.title()} rule {n}\n\nRule {n} of the {topic} says that item {n} costs {n * 7 + 3} dollars."
            f" It applies to {topic} requests filed after day {n + 1}.\n"
        )
    return "\n".join(parts).encode()


@pytest_asyncio.fixture(loop_scope="session")
async def queue_db(pg_dsn: str, data_dir: Path) -> AsyncIterator[tuple[Settings, object]]:
    async with migrated_schema(pg_dsn, data_dir, ingest_threads=1) as db:
        yield db


def worker(settings: Settings, pool: object, name: str) -> Worker:
    return Worker(settings, pool, lambda: load_embedder(settings, for_ingest=True, threads=1), name=name)


async def staged(pool: object, corpus: str) -> int:
    async with pool.acquire() as conn:  # type: ignore[attr-defined]
        return int(await conn.fetchval("SELECT count(*) FROM staged_passages WHERE corpus = $1", corpus))


async def test_a_job_killed_mid_way_is_taken_over_and_resumes_from_what_it_staged(
    queue_db: tuple[Settings, object],
) -> None:
    settings, pool = queue_db
    jobs = JobStore(pool)  # type: ignore[arg-type]
    job = await jobs.enqueue_upload("manual", [("manual.md", handbook(150, "travel"))], "editor")
    killed = asyncio.create_task(worker(settings, pool, "killed").run_once())
    deadline = time.monotonic() + 300
    while await staged(pool, "manual") < 64:  # one window of passages staged, more to come
        assert time.monotonic() < deadline and not killed.done(), "the first worker staged nothing"
        await asyncio.sleep(0.05)
    killed.cancel()
    with pytest.raises(asyncio.CancelledError):
        await killed
    held = await jobs.get(job.id)
    assert held is not None and held.state == "running" and held.worker == "killed"
    assert await jobs.uploads(job.id), "the upload's files wait for the job's end"
    # Nobody takes it over within the lease; once the killed worker's heartbeat is older, the next one does.
    assert not await worker(settings, pool, "early").run_once()
    async with pool.acquire() as conn:  # type: ignore[attr-defined]
        await conn.execute("UPDATE ingest_jobs SET heartbeat_at = now() - interval '5 minutes' WHERE id = $1", job.id)
    already = await staged(pool, "manual")
    assert await worker(settings, pool, "resumer").run_once()
    done = await jobs.get(job.id)
    assert done is not None and done.state == "done" and done.attempts == 2 and done.worker == "resumer"
    assert [d["status"] for d in done.documents] == ["added"]
    passages = done.progress["passages"]
    assert passages >= 150
    # What the killed worker staged was not embedded again.
    assert done.progress["embedded"] <= passages - already < passages
    [doc] = await SourceStore(pool).documents("manual")  # type: ignore[arg-type]
    async with pool.acquire() as conn:  # type: ignore[attr-defined]
        served = await conn.fetchval("SELECT count(*) FROM passages WHERE corpus = 'manual'")
        left = await conn.fetchval("SELECT count(*) FROM job_uploads WHERE job_id = $1", job.id)
    assert served == passages and left == 0 and doc.path.endswith("/manual.md")


async def test_two_workers_run_two_corpora_jobs_at_once_and_one_corpus_waits_its_turn(
    queue_db: tuple[Settings, object],
) -> None:
    settings, pool = queue_db
    jobs = JobStore(pool)  # type: ignore[arg-type]
    garden = await jobs.enqueue_upload("garden", [("garden.md", handbook(3, "garden"))], None)
    later = await jobs.enqueue_upload("garden", [("more.md", handbook(2, "compost"))], None)
    kitchen = await jobs.enqueue_upload("kitchen", [("kitchen.md", handbook(3, "kitchen"))], None)
    first, second = worker(settings, pool, "w1"), worker(settings, pool, "w2")
    assert await asyncio.gather(first.run_once(), second.run_once()) == [True, True]
    ran = {j.id: j for j in [await jobs.get(garden.id), await jobs.get(kitchen.id)] if j is not None}
    assert {j.state for j in ran.values()} == {"done"} and {j.worker for j in ran.values()} == {"w1", "w2"}
    waiting = await jobs.get(later.id)
    assert waiting is not None and waiting.state == "queued"
    assert await first.run_once() and not await second.run_once()
    assert [d.file_name for d in await SourceStore(pool).documents("garden")] == ["garden.md", "more.md"]  # type: ignore[arg-type]


def test_the_worker_command_refuses_no_workers() -> None:
    assert main(["worker", "--workers", "0"]) == 2


def test_provenance_worker_runs_what_a_server_without_workers_leaves_queued_and_uploads_are_rate_limited(
    pg_dsn: str, data_dir: Path
) -> None:
    settings = make_settings(pg_dsn, data_dir, ingest_workers=0, rate_limit_per_hour=0, upload_rate_per_hour=1)

    async def admin() -> str:
        pool = await create_pool(pg_dsn, settings)
        try:
            await migrate(pool)
            return await create_key(AccessStore(pool), "root", "admin")
        finally:
            await pool.close()

    headers = {"Authorization": f"Bearer {asyncio.run(admin())}"}
    try:
        with LiveServer(settings) as server:
            httpx.post(f"{server.url}/corpora", json={"name": "notes", "visibility": "public"}, headers=headers)
            accepted = httpx.post(
                f"{server.url}/corpora/notes/documents",
                files=[("files", ("notes.md", handbook(2, "notes"), "text/markdown"))],
                headers=headers,
            )
            assert accepted.status_code == 202, accepted.text
            job_id = accepted.json()["jobId"]
            # Uploads have their own hourly limit per key (UPLOAD_RATE_PER_HOUR, 1 here); questions are apart.
            again = httpx.post(
                f"{server.url}/corpora/notes/documents",
                files=[("files", ("more.md", handbook(1, "more"), "text/markdown"))],
                headers=headers,
            )
            assert again.status_code == 429 and again.json()["error"]["code"] == "rate_limited"
            message, retry = again.json()["error"]["message"], int(again.headers["retry-after"])
            # The wait in words, as every hourly limit says it (guards.ratelimit.spend_hourly).
            assert "1 upload per hour (UPLOAD_RATE_PER_HOUR)" in message and human_duration(retry) in message
            time.sleep(3)
            assert httpx.get(f"{server.url}/jobs/{job_id}", headers=headers).json()["state"] == "queued"
            assert asyncio.run(work(settings, 2, 1, once=True)) == 0
            job = httpx.get(f"{server.url}/jobs/{job_id}", headers=headers).json()
            assert job["state"] == "done" and job["documents"][0]["status"] == "added"
    finally:
        asyncio.run(drop_schema(pg_dsn, settings.database.schema))
