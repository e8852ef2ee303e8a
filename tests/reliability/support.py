"""Helpers shared by the reliability tests: a schema of its own holding the session's ingested corpus
(copied, so no test pays for embedding it again), optionally re-ingested from another folder."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import asyncpg

from provenance.guards.apikeys import create_key
from provenance.inference.embedder import Embedder
from provenance.ingest.folder import ingest
from provenance.settings import Settings
from provenance.store import Store
from provenance.store.pool import create_pool, migrate
from tests.conftest import LiveServer, make_settings
from tests.fake_anthropic import FakeAnthropic

SOURCE_SCHEMA = "t_corpus"  # the `corpus_services` fixture's schema: corpus/ ingested once per session
_PASSAGE_COLUMNS = "id, source, heading, position, text, token_count, embedding, embedding_model, content_hash"


async def corpus_copy(
    pg_dsn: str,
    data_dir: Path,
    embedder: Embedder | None = None,
    corpus: Path | None = None,
    *,
    target_dsn: str | None = None,
    sources: tuple[str, ...] | None = None,
    **overrides: object,
) -> Settings:
    """Settings for a fresh, migrated schema holding a copy of the session's corpus (on `target_dsn`, the
    session's server by default; only files named in `sources` when given). With `corpus`, that folder is
    then ingested over it, so only passages that differ from corpus/ are embedded."""
    settings = make_settings(target_dsn or pg_dsn, data_dir, **overrides)
    source_pool = await create_pool(pg_dsn, make_settings(pg_dsn, data_dir, schema=SOURCE_SCHEMA))
    try:
        async with source_pool.acquire() as conn:
            rows = await conn.fetch(f"SELECT {_PASSAGE_COLUMNS} FROM passages ORDER BY id")
            state = await conn.fetchrow("SELECT * FROM corpus_state")
    finally:
        await source_pool.close()
    assert state is not None, "the session's corpus is not ingested (depend on the corpus_services fixture)"
    rows = [r for r in rows if sources is None or r["source"] in sources]
    pool = await create_pool(target_dsn or pg_dsn, settings)
    try:
        await migrate(pool)
        async with pool.acquire() as conn:
            await conn.executemany(
                f"INSERT INTO passages ({_PASSAGE_COLUMNS}) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
                [tuple(r.values()) for r in rows],
            )
            await conn.execute(
                "INSERT INTO corpus_state (version, embedding_model, fingerprint, passage_count, files)"
                " VALUES ($1, $2, $3, $4, $5::jsonb)",
                state["version"] if sources is None else f"{state['version'][:8]}-part",
                state["embedding_model"],
                state["fingerprint"],
                len(rows),
                state["files"],
            )
        if corpus is not None:
            assert embedder is not None
            await ingest(Store(pool), corpus, lambda: embedder, settings.embedding.model)
    finally:
        await pool.close()
    return settings


async def drop_schema(pg_dsn: str, schema: str) -> None:
    conn = await asyncpg.connect(pg_dsn)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


@contextlib.asynccontextmanager
async def migrated_schema(pg_dsn: str, data_dir: Path, **overrides: Any) -> AsyncIterator[tuple[Settings, Any]]:
    """A schema of its own, migrated, with a pool on it; dropped after. `overrides`: make_settings's."""
    settings = make_settings(pg_dsn, data_dir, **overrides)
    pool = await create_pool(pg_dsn, settings)
    await migrate(pool)
    try:
        yield settings, pool
    finally:
        await pool.close()
        await drop_schema(pg_dsn, settings.database.schema)


@contextlib.asynccontextmanager
async def one_slot_server(
    pg_dsn: str, data_dir: Path, fake: FakeAnthropic, *, key_name: str, timeout_s: float, **limits: Any
) -> AsyncIterator[tuple[LiveServer, str, Settings]]:
    """A live server of the anthropic profile against the fake Messages API, with one pipeline slot and no
    queue (a model call that hangs holds the slot, so the next uncached question is overloaded), no retries,
    an API key named `key_name`, and the rate limits given; its schema dropped afterwards."""
    settings = await corpus_copy(pg_dsn, data_dir, ask_concurrency=1, ask_queue_max=0, **limits)
    settings = fake.settings(settings, anthropic_timeout_s=timeout_s, anthropic_max_retries=0)
    pool = await create_pool(pg_dsn, settings)
    try:
        key = await create_key(Store(pool), key_name)
    finally:
        await pool.close()
    assert key is not None
    try:
        with LiveServer(settings) as server:
            yield server, key, settings
    finally:
        await drop_schema(pg_dsn, settings.database.schema)


@contextlib.contextmanager
def serving_keys(
    pg_dsn: str, settings: Settings, prepare: Callable[[asyncpg.Pool], Awaitable[dict[str, str | None]]]
) -> Iterator[tuple[LiveServer, dict[str, dict[str, str]]]]:
    """A real server on a migrated schema, with what `prepare` made in it (corpora, grants) and the keys it
    returns, each as its Authorization header; the schema is dropped afterwards."""

    async def made() -> dict[str, str | None]:
        pool = await create_pool(pg_dsn, settings)
        try:
            await migrate(pool)
            return await prepare(pool)
        finally:
            await pool.close()

    keys = asyncio.run(made())
    headers = {who: {"Authorization": f"Bearer {key}"} for who, key in keys.items() if key is not None}
    try:
        with LiveServer(settings) as server:
            yield server, headers
    finally:
        asyncio.run(drop_schema(pg_dsn, settings.database.schema))
