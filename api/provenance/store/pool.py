"""Connection pool (pgvector codec registered on every connection) and the migration runner."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg
from pgvector.asyncpg import register_vector

from provenance.errors import MigrationError, Overloaded
from provenance.settings import REPO_ROOT, Settings

MIGRATIONS_DIR = REPO_ROOT / "db" / "migrations"
# Any constant works; it only has to be the same in every process that migrates this database.
_MIGRATION_LOCK = 727_001
_SCHEMA_LOCK = 727_002
# The pool's statements time out after DB_TIMEOUT_S, so that a database that accepts connections but never
# answers fails a request as fast as one that is down. Operator work (ingest, index builds, migrations)
# passes this instead: it may rightly run for minutes, and an hour still ends a truly hung one.
MAINTENANCE_TIMEOUT_S = 3600.0


def resolve_database_url(settings: Settings) -> str:
    if settings.database.url:
        return settings.database.url
    from provenance.store.embedded_pg import start_embedded

    return start_embedded(settings.pg_data_dir)


async def _init_connection(conn: asyncpg.Connection) -> None:
    await register_vector(conn)


async def _keep_session(conn: asyncpg.Connection) -> None:
    """The pool's reset on release. asyncpg's default sends `RESET ALL; UNLISTEN *; ...` after every use: a
    second round trip for a one-statement request (a cached answer). Nothing here changes session state:
    the one session setting is the pool's own (`server_settings`, the same on every connection), other
    settings are `SET LOCAL` inside transactions, the migration lock is unlocked in a `finally`, and an open
    transaction is still rolled back by the pool itself before this runs."""


# How many candidates one pass of the HNSW index gathers: at least hybrid retrieval's pool (50 at the default
# k, stages.retrieve.hybrid_pool), so one pass fills it. At pgvector's default 40 the iterative scan went round
# again for part of the questions: bench/exact_scan.py, 100,000 passages, hybrid search p95 17-39 ms against
# 5-7 ms at 64 (p50 4-8 against 4-5; 2-3 ms p50, 4-5 ms p95 with rank fusion's pool of 20).
HNSW_EF_SEARCH = 64


async def create_pool(dsn: str, settings: Settings) -> asyncpg.Pool:
    """A pool whose connections see `settings.database.schema` first, so an eval run can use its own schema."""
    await ensure_schema(dsn, settings.database.schema, settings.database.timeout_s)
    pool = await asyncpg.create_pool(
        dsn,
        min_size=settings.database.pool_min,
        max_size=settings.database.pool_max,
        init=_init_connection,
        reset=_keep_session,
        timeout=settings.database.timeout_s,
        command_timeout=settings.database.timeout_s,
        server_settings={
            "search_path": f"{settings.database.schema},public",
            # The HNSW index (one over every corpus) yields its nearest rows before the corpus filter; an
            # iterative scan keeps reading until the LIMIT is met from this corpus (pgvector >= 0.8). Set
            # per connection at connect time rather than `SET LOCAL` per search, which took a transaction
            # and three extra round trips; a search is one statement.
            "hnsw.iterative_scan": "strict_order",
            "hnsw.ef_search": str(HNSW_EF_SEARCH),
        },
    )
    assert pool is not None
    return pool


async def ensure_schema(dsn: str, schema: str, connect_timeout_s: float = 60.0) -> None:
    # A database that accepts the connection but never answers fails within the connect timeout (the
    # start-up handshake is never answered), as a dead one does.
    conn = await asyncpg.connect(dsn, timeout=connect_timeout_s)
    try:
        # Two processes starting at once on a fresh database (workers, a server beside the evals) would
        # race in `IF NOT EXISTS`, which is not atomic: the loser fails on a unique index. Take turns.
        async with conn.transaction():
            await conn.execute("SELECT pg_advisory_xact_lock($1)", _SCHEMA_LOCK, timeout=MAINTENANCE_TIMEOUT_S)
            # The vector extension must exist before register_vector can find its type.
            await conn.execute("CREATE EXTENSION IF NOT EXISTS vector WITH SCHEMA public")
            if schema != "public":
                # Identifiers can't be bind parameters; Settings validated the name as a plain identifier.
                await conn.execute(f'CREATE SCHEMA IF NOT EXISTS "{schema}"')
    finally:
        await conn.close()


def migration_files(directory: Path = MIGRATIONS_DIR) -> list[Path]:
    files = sorted(p for p in directory.glob("*.sql") if p.name[:3].isdigit())
    names = [p.name[:3] for p in files]
    if len(set(names)) != len(names):
        raise RuntimeError(f"two migrations share a number in {directory}")
    return files


async def migrate(pool: asyncpg.Pool, directory: Path = MIGRATIONS_DIR) -> list[str]:
    """Apply pending migrations in order, each in its own transaction; returns the names applied."""
    applied: list[str] = []
    async with pool.acquire() as conn:
        # Another process may hold the lock for as long as its migrations take.
        await conn.execute("SELECT pg_advisory_lock($1)", _MIGRATION_LOCK, timeout=MAINTENANCE_TIMEOUT_S)
        try:
            await conn.execute(
                """
                CREATE TABLE IF NOT EXISTS schema_migrations (
                    name       text PRIMARY KEY,
                    checksum   text NOT NULL,
                    applied_at timestamptz NOT NULL DEFAULT now()
                )
                """,
                timeout=MAINTENANCE_TIMEOUT_S,
            )
            done: dict[str, Any] = {
                r["name"]: r["checksum"] for r in await conn.fetch("SELECT name, checksum FROM schema_migrations")
            }
            for path in migration_files(directory):
                sql = path.read_text(encoding="utf-8")
                checksum = hashlib.sha256(sql.encode()).hexdigest()
                if path.name in done:
                    if done[path.name] != checksum:
                        # An applied migration edited afterwards would be skipped silently, leaving this
                        # database unlike one migrated from scratch: refuse to start instead.
                        raise MigrationError(
                            f"migration {path.name} was changed after it was applied to this database "
                            "(its checksum differs); add a new migration instead of editing an applied one"
                        )
                    continue
                async with conn.transaction():
                    await conn.execute(sql, timeout=MAINTENANCE_TIMEOUT_S)
                    await conn.execute(
                        "INSERT INTO schema_migrations (name, checksum) VALUES ($1, $2)",
                        path.name,
                        checksum,
                        timeout=MAINTENANCE_TIMEOUT_S,
                    )
                applied.append(path.name)
        finally:
            await conn.execute("SELECT pg_advisory_unlock($1)", _MIGRATION_LOCK)
    return applied


class Pooled:
    """A store's connections: pooled, acquired within a timeout, and dropped rather than waited on when a
    statement times out. Both stores are one of these over the same pool."""

    def __init__(self, pool: asyncpg.Pool, acquire_timeout_s: float | None = None) -> None:
        self.pool = pool
        # Bounds the wait for a connection, reconnecting included: with the database down, a request
        # fails within this time (and the app answers 503) instead of queueing behind a dead pool.
        self.acquire_timeout_s = acquire_timeout_s

    @asynccontextmanager
    async def _conn(self, *, transaction: bool = False, commit_timeout_s: float | None = None) -> AsyncIterator[Any]:
        """`async with self._conn() as conn`: a pooled connection, acquired within the timeout. With
        `transaction`, what runs in the block commits at its end, or none of it does."""
        try:
            # asyncio.timeout rather than acquire(timeout=): asyncpg's own wraps the wait in a task of its
            # own on every acquire, which showed in the cached path's profile.
            async with asyncio.timeout(self.acquire_timeout_s):
                conn = await self.pool.acquire()
        except TimeoutError:
            # Every connection open and lent out means Postgres is answering and we are asking too much
            # at once: an overload, not an outage. (A database that stops answering queries shows up here
            # too, for at most the pool's command timeout, DB_TIMEOUT_S; then those queries fail as an outage.)
            if self.pool.get_idle_size() == 0 and self.pool.get_size() >= self.pool.get_max_size():
                raise Overloaded("every database connection is busy; try again shortly", retry_after_s=2) from None
            raise
        try:
            # BEGIN and COMMIT by hand rather than conn.transaction(): its ROLLBACK would run before the
            # handler below could drop a timed-out connection, and wait out a second timeout.
            if transaction:
                await conn.execute("BEGIN")
            yield conn
            if transaction:
                await conn.execute("COMMIT", timeout=commit_timeout_s)
        except TimeoutError:
            # A statement that timed out leaves the connection waiting on a cancel request sent to the same
            # server, and anything after it (ROLLBACK, the pool's reset) queues behind that. When the
            # server has stopped answering, each would wait out another timeout: drop the connection
            # instead, so the caller fails within one. Postgres rolls back what was open when it goes, and
            # the pool opens a fresh connection when one is next needed.
            conn.terminate()
            raise
        except BaseException:
            if transaction and not conn.is_closed():
                await conn.execute("ROLLBACK")
            raise
        finally:
            await self.pool.release(conn)
