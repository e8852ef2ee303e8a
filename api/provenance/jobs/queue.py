"""The ingest queue: jobs in Postgres, taken with `SELECT ... FOR UPDATE SKIP LOCKED` on the service's own
asyncpg pool.

Why not procrastinate: it would bring psycopg 3 and a second connection pool beside asyncpg, a schema of
its own to migrate apart from db/migrations, and its own worker loop, for what is here one table and three
statements; and the one rule this queue needs beyond taking a job once (one job at a time per corpus) would
still be ours, as a lock or a queueing convention. Not measured against it: see the commit that added this.

A job is `queued`, then `running` (one worker holds it and touches `heartbeat_at`), then `done` (it ran to its
end, even when some of its documents failed) or `failed` (it could not run). A running job whose heartbeat
is older than the lease is taken again: its worker was killed, and the new one resumes from the staging area.
`provenance ingest DIR` holds its corpus's slot with a job of its own; when it is killed, the next run of the
command frees the slot itself (at once when the killed process was of its machine, else after the lease), so
no worker is needed to recover it (`start_local`).
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Callable
from typing import Any, Literal

import asyncpg
import msgspec

from provenance.store.pool import Pooled

JobKind = Literal["add", "remove", "sync"]
JobState = Literal["queued", "running", "done", "failed"]
# Where a running job is: `passages` while its documents are read and their passages embedded and staged, up
# to the corpus's one switch (nothing of them is served yet); `sentences` once the corpus is switched (its new
# documents answer questions) while their sentences' vectors are computed; `done` at its end.
JobPhase = Literal["passages", "sentences", "done"]
# How long a running job's worker may go without touching it before another worker takes the job over.
LEASE_S = 60.0
# Why a `provenance ingest` job that stopped before its end (killed, or its machine gone) failed.
LOCAL_STOPPED = (
    "its `provenance ingest` stopped before its end; the next ingest of the folder resumes from what it staged"
)

_COLUMNS = (
    "id, corpus, kind, state, key_name, payload::text AS payload, progress::text AS progress,"
    " documents::text AS documents, error, worker, attempts, created_at, started_at, heartbeat_at, finished_at"
)


class JobProgress(msgspec.Struct, frozen=True, kw_only=True, rename="camel"):
    """A job's progress as its worker writes it and GET /jobs/{id} shows it: the documents read, the passages
    made and those embedded; its phase; and, in the `sentences` phase, the passages whose sentences' vectors
    it has computed of those it has to."""

    documents: int = 0
    passages: int = 0
    embedded: int = 0
    phase: JobPhase = "passages"
    sentences_embedded: int = 0
    sentences_to_embed: int = 0

    def wire(self) -> dict[str, Any]:
        """As the job's `progress` column (and GET /jobs/{id}) holds it."""
        out: dict[str, Any] = msgspec.to_builtins(self)
        return out


class Job(msgspec.Struct, frozen=True):
    id: str
    corpus: str
    kind: JobKind
    state: JobState
    key_name: str | None
    payload: dict[str, Any]
    progress: dict[str, Any]
    documents: list[dict[str, Any]]
    error: str | None
    worker: str | None
    attempts: int
    created_at: dt.datetime
    started_at: dt.datetime | None
    heartbeat_at: dt.datetime | None
    finished_at: dt.datetime | None


def _job(row: Any) -> Job:
    return Job(
        **{
            **dict(row),
            "payload": msgspec.json.decode(row["payload"]),
            "progress": msgspec.json.decode(row["progress"]),
            "documents": msgspec.json.decode(row["documents"]),
        }
    )


class JobStore(Pooled):
    async def enqueue(self, corpus: str, kind: JobKind, payload: dict[str, Any], key_name: str | None = None) -> Job:
        async with self._conn() as conn:
            row = await conn.fetchrow(
                f"INSERT INTO ingest_jobs (id, corpus, kind, payload, key_name) VALUES ($1, $2, $3, $4::jsonb, $5)"
                f" RETURNING {_COLUMNS}",
                uuid.uuid4().hex,
                corpus,
                kind,
                msgspec.json.encode(payload).decode(),
                key_name,
            )
        return _job(row)

    async def enqueue_upload(self, corpus: str, files: list[tuple[str, bytes]], key_name: str | None) -> Job:
        """An upload's job and its files, in one transaction: no worker sees the job before its files."""
        payload = {"files": [name for name, _ in files]}
        async with self._conn(transaction=True) as conn:
            row = await conn.fetchrow(
                f"INSERT INTO ingest_jobs (id, corpus, kind, payload, key_name) VALUES ($1, $2, 'add', $3::jsonb, $4)"
                f" RETURNING {_COLUMNS}",
                uuid.uuid4().hex,
                corpus,
                msgspec.json.encode(payload).decode(),
                key_name,
            )
            await conn.executemany(
                "INSERT INTO job_uploads (job_id, position, file_name, original) VALUES ($1, $2, $3, $4)",
                [(row["id"], n, name, data) for n, (name, data) in enumerate(files)],
            )
        return _job(row)

    async def start_local(
        self,
        corpus: str,
        payload: dict[str, Any],
        worker: str,
        lease_s: float = LEASE_S,
        stopped: Callable[[str], bool] = lambda _: False,
    ) -> Job | None:
        """A `sync` job, made running at once by the command that runs it here (`provenance ingest DIR`), so that
        it holds its corpus's one slot as a worker's job does; None while another job of the corpus runs.

        A job whose holder is gone does not keep the slot: one whose heartbeat is older than `lease_s`, or whose
        holder `stopped` says has stopped (an ingest of this host whose process is gone), is released first, in
        the same transaction: another command's job is failed (this run resumes what it staged), a worker's is
        queued again with its files (a worker resumes it later). So a killed ingest never needs a worker to
        free its corpus."""
        try:
            async with self._conn(transaction=True) as conn:
                held = await conn.fetchrow(
                    "SELECT id, worker, payload ? 'folder' AS local,"
                    " heartbeat_at < now() - make_interval(secs => $2) AS expired"
                    " FROM ingest_jobs WHERE corpus = $1 AND state = 'running' FOR UPDATE",
                    corpus,
                    lease_s,
                )
                if held is not None:
                    if not (held["expired"] or stopped(held["worker"] or "")):
                        return None
                    await _release(conn, held["id"], local=held["local"])
                row = await conn.fetchrow(
                    "INSERT INTO ingest_jobs (id, corpus, kind, state, payload, worker, attempts, started_at,"
                    " heartbeat_at) VALUES ($1, $2, 'sync', 'running', $3::jsonb, $4, 1, now(), now())"
                    f" RETURNING {_COLUMNS}",
                    uuid.uuid4().hex,
                    corpus,
                    msgspec.json.encode(payload).decode(),
                    worker,
                )
        except asyncpg.UniqueViolationError:
            return None
        return _job(row)

    async def abandon(self, job_id: str, worker: str) -> bool:
        """A local folder job that a worker took over: workers can't run it (its folder is on the command's
        machine), so it fails, freeing its corpus; the next ingest of the folder resumes what it staged."""
        async with self._conn() as conn:
            done = await conn.fetchval(
                "UPDATE ingest_jobs SET state = 'failed', error = $3, finished_at = now()"
                " WHERE id = $1 AND worker = $2 AND state = 'running' RETURNING true",
                job_id,
                worker,
                LOCAL_STOPPED,
            )
        return bool(done)

    async def uploads(self, job_id: str) -> list[tuple[str, bytes]]:
        async with self._conn() as conn:
            rows = await conn.fetch(
                "SELECT file_name, original FROM job_uploads WHERE job_id = $1 ORDER BY position", job_id
            )
        return [(r["file_name"], bytes(r["original"])) for r in rows]

    async def claim(self, worker: str, lease_s: float = LEASE_S, only: str | None = None) -> Job | None:
        """The oldest job this worker may start now, marked running; None when there is none. A queued job
        waits while another of its corpus runs; a running one whose heartbeat is older than `lease_s` is taken
        over. Workers skip the rows others are taking (SKIP LOCKED), so they never wait on each other."""
        try:
            async with self._conn() as conn:
                row = await conn.fetchrow(
                    f"""
                    UPDATE ingest_jobs SET state = 'running', worker = $1, attempts = attempts + 1,
                        started_at = coalesce(started_at, now()), heartbeat_at = now()
                    WHERE id = (
                        SELECT j.id FROM ingest_jobs j
                        WHERE ((j.state = 'queued' AND NOT EXISTS (
                                SELECT 1 FROM ingest_jobs r WHERE r.corpus = j.corpus AND r.state = 'running'))
                            OR (j.state = 'running' AND j.heartbeat_at < now() - make_interval(secs => $2)))
                            AND ($3::text IS NULL OR j.id = $3)
                        ORDER BY j.created_at, j.id
                        LIMIT 1
                        FOR UPDATE SKIP LOCKED
                    )
                    RETURNING {_COLUMNS}
                    """,
                    worker,
                    lease_s,
                    only,
                )
        except asyncpg.UniqueViolationError:
            # Another worker started a job of the same corpus between our look and our update.
            return None
        return None if row is None else _job(row)

    async def heartbeat(self, job_id: str, worker: str, progress: dict[str, Any]) -> bool:
        """Touch a running job and record its progress; False when the job is no longer this worker's (it was
        taken over after this worker went quiet for longer than the lease): the worker must stop."""
        async with self._conn() as conn:
            held = await conn.fetchval(
                "UPDATE ingest_jobs SET heartbeat_at = now(), progress = $3::jsonb"
                " WHERE id = $1 AND worker = $2 AND state = 'running' RETURNING true",
                job_id,
                worker,
                msgspec.json.encode(progress).decode(),
            )
        return bool(held)

    async def finish(
        self,
        job_id: str,
        worker: str,
        state: Literal["done", "failed"],
        documents: list[dict[str, Any]],
        error: str | None = None,
        progress: dict[str, Any] | None = None,
    ) -> bool:
        async with self._conn(transaction=True) as conn:
            # The files are decided: kept as documents, or refused with their reasons in `documents`.
            await conn.execute("DELETE FROM job_uploads WHERE job_id = $1", job_id)
            finished = await conn.fetchval(
                "UPDATE ingest_jobs SET state = $3, documents = $4::jsonb, error = $5, finished_at = now(),"
                " progress = coalesce($6::jsonb, progress)"
                " WHERE id = $1 AND worker = $2 AND state = 'running' RETURNING true",
                job_id,
                worker,
                state,
                msgspec.json.encode(documents).decode(),
                error,
                None if progress is None else msgspec.json.encode(progress).decode(),
            )
        return bool(finished)

    async def get(self, job_id: str) -> Job | None:
        async with self._conn() as conn:
            row = await conn.fetchrow(f"SELECT {_COLUMNS} FROM ingest_jobs WHERE id = $1", job_id)
        return None if row is None else _job(row)

    async def schedule_syncs(self) -> list[str]:
        """Queue a sync of each corpus whose sites are due (`--every`): none of its sync jobs was created
        within its shortest schedule, and none is waiting or running. Every worker of every replica calls
        this when idle; the transaction's advisory lock makes them take turns, and each turn's statement sees
        the jobs the turn before it queued, so a due corpus gets one sync, not one per replica. The corpora
        it queued for."""
        async with self._conn(transaction=True) as conn:
            await conn.execute("SELECT pg_advisory_xact_lock(hashtext('provenance.schedule_syncs'))")
            rows = await conn.fetch(
                """
                INSERT INTO ingest_jobs (id, corpus, kind, payload)
                SELECT md5(random()::text || clock_timestamp()::text || due.corpus), due.corpus, 'sync',
                    '{"scheduled": true}'::jsonb
                FROM (
                    SELECT corpus, min((options->>'everyS')::float) AS every_s FROM sources
                    WHERE kind = 'site' AND options ? 'everyS' GROUP BY corpus
                ) due
                WHERE NOT EXISTS (
                    SELECT 1 FROM ingest_jobs j WHERE j.corpus = due.corpus AND j.kind = 'sync'
                        AND (j.state IN ('queued', 'running')
                            OR j.created_at > now() - make_interval(secs => due.every_s))
                )
                RETURNING corpus
                """
            )
        return [r["corpus"] for r in rows]


async def _release(conn: Any, job_id: str, *, local: bool) -> None:
    """A running job whose holder is gone, let go: a command's folder job fails (its folder is only there), a
    worker's job waits in the queue again, its files kept, so that a worker resumes it from what it staged."""
    if local:
        await conn.execute(
            "UPDATE ingest_jobs SET state = 'failed', error = $2, finished_at = now() WHERE id = $1",
            job_id,
            LOCAL_STOPPED,
        )
    else:
        await conn.execute(
            "UPDATE ingest_jobs SET state = 'queued', worker = NULL, heartbeat_at = NULL WHERE id = $1", job_id
        )
