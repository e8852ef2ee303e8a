"""The ingest queue against a real Postgres: workers take different jobs, one corpus runs one job at a time,
a killed worker's job is taken over, and a worker that lost its job is told so."""

from __future__ import annotations

import asyncio

import asyncpg

from provenance.jobs.queue import JobStore
from provenance.store import Store


def jobs(store: Store) -> JobStore:
    return JobStore(store.pool, store.acquire_timeout_s)


async def test_two_workers_on_one_queue_take_different_jobs(fresh_store: Store) -> None:
    queue = jobs(fresh_store)
    first = await queue.enqueue("garden", "add", {"documents": ["a"]})
    second = await queue.enqueue("handbook", "add", {"documents": ["b"]})
    taken = await asyncio.gather(queue.claim("worker-1"), queue.claim("worker-2"))
    assert all(t is not None for t in taken)
    assert {t.id for t in taken if t} == {first.id, second.id}
    assert {t.worker for t in taken if t} == {"worker-1", "worker-2"}
    assert await queue.claim("worker-3") is None


async def test_a_corpus_runs_one_job_at_a_time_even_when_workers_race(fresh_store: Store) -> None:
    queue = jobs(fresh_store)
    queued = [await queue.enqueue("garden", "add", {"n": n}) for n in range(6)]
    other = await queue.enqueue("handbook", "add", {})
    taken = [t for t in await asyncio.gather(*(queue.claim(f"w{n}") for n in range(8))) if t is not None]
    by_corpus = sorted(t.corpus for t in taken)
    assert by_corpus == ["garden", "handbook"]
    # The oldest of the corpus's jobs first.
    assert next(t for t in taken if t.corpus == "garden").id == queued[0].id
    assert other.id in {t.id for t in taken}
    garden = next(t for t in taken if t.corpus == "garden")
    assert await queue.finish(garden.id, garden.worker or "", "done", [{"fileName": "a.md", "status": "added"}])
    following = await queue.claim("w9")
    assert following is not None and following.id == queued[1].id


async def test_a_killed_workers_job_is_taken_over_and_the_old_worker_learns_it_lost_it(fresh_store: Store) -> None:
    queue = jobs(fresh_store)
    job = await queue.enqueue("garden", "add", {})
    held = await queue.claim("killed")
    assert held is not None and held.attempts == 1
    # Within the lease nobody takes it.
    assert await queue.claim("other", lease_s=60) is None
    async with fresh_store.pool.acquire() as conn:
        await conn.execute("UPDATE ingest_jobs SET heartbeat_at = now() - interval '2 minutes' WHERE id = $1", job.id)
    resumed = await queue.claim("other", lease_s=60)
    assert resumed is not None and resumed.id == job.id and resumed.attempts == 2 and resumed.worker == "other"
    assert resumed.started_at == held.started_at
    # The killed worker, were it only paused, may neither report nor finish the job now.
    assert not await queue.heartbeat(job.id, "killed", {"documents": 1})
    assert not await queue.finish(job.id, "killed", "done", [])
    assert await queue.heartbeat(job.id, "other", {"documents": 1, "passages": 4})
    assert await queue.finish(job.id, "other", "done", [{"fileName": "a.md", "status": "added"}])
    done = await queue.get(job.id)
    assert done is not None and done.state == "done" and done.progress == {"documents": 1, "passages": 4}
    assert done.documents == [{"fileName": "a.md", "status": "added"}] and done.finished_at is not None


async def test_the_database_itself_refuses_a_second_running_job_for_one_corpus(fresh_store: Store) -> None:
    queue = jobs(fresh_store)
    first = await queue.enqueue("garden", "add", {})
    second = await queue.enqueue("garden", "remove", {})
    assert await queue.claim("w1") is not None
    async with fresh_store.pool.acquire() as conn:
        try:
            await conn.execute("UPDATE ingest_jobs SET state = 'running' WHERE id = $1", second.id)
        except asyncpg.UniqueViolationError:
            pass
        else:
            raise AssertionError("two running jobs of one corpus were allowed")
    assert (await queue.get(first.id)).state == "running"  # type: ignore[union-attr]


async def test_a_due_site_is_scheduled_once_however_many_replicas_ask_at_once(fresh_store: Store) -> None:
    from provenance.store.sources import SourceStore

    sources = SourceStore(fresh_store.pool)
    await sources.add_source("handbook", "site", "https://docs.example.org/", {"everyS": 3600})
    await sources.add_source("manual", "site", "https://manual.example.org/", {})  # no schedule
    queue = jobs(fresh_store)
    scheduled = await asyncio.gather(*(queue.schedule_syncs() for _ in range(6)))
    assert sorted(c for turn in scheduled for c in turn) == ["handbook"]
    # Within the hour nothing more, even once that sync has run.
    taken = await queue.claim("w")
    assert taken is not None and taken.kind == "sync" and taken.payload == {"scheduled": True}
    assert await queue.finish(taken.id, "w", "done", [])
    assert await queue.schedule_syncs() == []
    async with fresh_store.pool.acquire() as conn:
        await conn.execute("UPDATE ingest_jobs SET created_at = now() - interval '61 minutes'")
    assert await queue.schedule_syncs() == ["handbook"]


async def test_a_replica_scheduling_waits_for_the_turn_of_another_and_sees_what_it_queued(fresh_store: Store) -> None:
    from provenance.store.sources import SourceStore

    await SourceStore(fresh_store.pool).add_source("handbook", "site", "https://docs.example.org/", {"everyS": 3600})
    queue = jobs(fresh_store)
    other = await fresh_store.pool.acquire()
    try:
        turn = other.transaction()
        await turn.start()  # another replica, in the middle of its turn: the lock held, its job not committed yet
        await other.execute("SELECT pg_advisory_xact_lock(hashtext('provenance.schedule_syncs'))")
        await other.execute(
            "INSERT INTO ingest_jobs (id, corpus, kind, payload) VALUES (md5('x'), 'handbook', 'sync', '{}')"
        )
        ours = asyncio.create_task(queue.schedule_syncs())
        await asyncio.sleep(0.5)
        assert not ours.done()  # waits for the other's turn instead of reading around it
        await turn.commit()
        assert await ours == []  # and then sees its job: one sync, not two
    finally:
        await fresh_store.pool.release(other)
