import asyncpg
import pytest

from provenance.errors import MigrationError
from provenance.store.pool import create_pool, migrate, migration_files
from tests.conftest import make_settings


async def test_migrations_apply_in_order_once(pg_dsn: str, data_dir) -> None:  # type: ignore[no-untyped-def]
    settings = make_settings(pg_dsn, data_dir)
    pool = await create_pool(pg_dsn, settings)
    try:
        first = await migrate(pool)
        assert first == [p.name for p in migration_files()]
        assert await migrate(pool) == []  # running it twice changes nothing
        async with pool.acquire() as conn:
            names = [r["name"] for r in await conn.fetch("SELECT name FROM schema_migrations ORDER BY name")]
            assert names == first
            tables = {
                r["table_name"]
                for r in await conn.fetch(
                    "SELECT table_name FROM information_schema.tables WHERE table_schema = $1",
                    settings.database.schema,
                )
            }
            assert {
                "passages",
                "answer_cache",
                "rate_limits",
                "spend_ledger",
                "corpus_state",
                "api_keys",
                "recent_responses",
                "feedback",
                "feedback_secret",
                "passage_sentences",
                "staged_passages",
                "staged_sentences",
                "word_vectors",
            } <= tables
            ext = await conn.fetchval("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            assert ext is not None
    finally:
        await pool.close()
        conn = await asyncpg.connect(pg_dsn)
        await conn.execute(f'DROP SCHEMA "{settings.database.schema}" CASCADE')
        await conn.close()


async def test_an_applied_migration_edited_afterwards_is_an_error(pg_dsn: str, data_dir, tmp_path) -> None:  # type: ignore[no-untyped-def]
    settings = make_settings(pg_dsn, data_dir)
    pool = await create_pool(pg_dsn, settings)
    folder = tmp_path / "migrations"
    folder.mkdir()
    first = folder / "001_notes.sql"
    first.write_text("CREATE TABLE notes (id int PRIMARY KEY);\n")
    try:
        assert await migrate(pool, folder) == ["001_notes.sql"]
        first.write_text("CREATE TABLE notes (id int PRIMARY KEY, body text);\n")
        with pytest.raises(MigrationError, match=r"001_notes\.sql was changed after it was applied"):
            await migrate(pool, folder)
        # Nothing after the edited one is applied either.
        (folder / "002_more.sql").write_text("CREATE TABLE more_notes (id int);\n")
        with pytest.raises(MigrationError):
            await migrate(pool, folder)
        async with pool.acquire() as conn:
            names = [r["name"] for r in await conn.fetch("SELECT name FROM schema_migrations")]
        assert names == ["001_notes.sql"]
    finally:
        await pool.close()
        conn = await asyncpg.connect(pg_dsn)
        await conn.execute(f'DROP SCHEMA "{settings.database.schema}" CASCADE')
        await conn.close()


async def test_processes_starting_at_once_on_a_fresh_schema_take_turns(pg_dsn: str) -> None:
    """Workers, or a server beside the evals, create the schema at the same moment: `IF NOT EXISTS` is not
    atomic, and without the lock the loser fails on pg_namespace's unique index."""
    import asyncio
    import uuid

    from provenance.store.pool import ensure_schema

    schema = f"race_{uuid.uuid4().hex[:8]}"
    try:
        for _ in range(3):
            await asyncio.gather(*(ensure_schema(pg_dsn, schema) for _ in range(8)))
        conn = await asyncpg.connect(pg_dsn)
        try:
            assert await conn.fetchval("SELECT count(*) FROM pg_namespace WHERE nspname = $1", schema) == 1
        finally:
            await conn.close()
    finally:
        conn = await asyncpg.connect(pg_dsn)
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        await conn.close()


async def test_a_response_kept_before_its_envelope_became_text_reads_back_the_same(  # type: ignore[no-untyped-def]
    pg_dsn: str, data_dir, tmp_path
) -> None:
    """017_envelope_text.sql turns each kept envelope into text; the view merges it over its body as before."""
    import json
    import shutil

    settings = make_settings(pg_dsn, data_dir)
    pool = await create_pool(pg_dsn, settings)
    before = tmp_path / "before"
    before.mkdir()
    for path in migration_files():
        if path.name < "017":
            shutil.copy(path, before / path.name)
    body = {"requestId": "", "answer": "$14 a month.", "stages": {"cache": {"status": "skipped"}, "gate": {"ok": 1}}}
    envelope = {"requestId": "kept-before", "totalMs": 2.5, "stages": {"cache": {"status": "hit"}}}
    try:
        await migrate(pool, before)
        async with pool.acquire() as conn:
            await conn.execute(
                "INSERT INTO response_bodies (digest, settings, body, last_served) VALUES ('\\x01', '{}', $1, now())",
                json.dumps(body),
            )
            await conn.execute(
                "INSERT INTO served_responses (request_id, question, status, cached, body_digest, envelope,"
                " served_at) VALUES ('kept-before', 'q', 'answered', true, '\\x01', $1, now())",
                json.dumps(envelope),
            )
        assert await migrate(pool) == ["017_envelope_text.sql"] + [
            p.name for p in migration_files() if p.name > "017_envelope_text.sql"
        ]
        async with pool.acquire() as conn:
            kept = json.loads(await conn.fetchval("SELECT response::text FROM recent_responses"))
            assert await conn.fetchval("SELECT pg_typeof(envelope)::text FROM served_responses") == "text"
        assert kept == {
            "requestId": "kept-before",
            "answer": "$14 a month.",
            "totalMs": 2.5,
            "stages": {"cache": {"status": "hit"}, "gate": {"ok": 1}},
        }
    finally:
        await pool.close()
        conn = await asyncpg.connect(pg_dsn)
        await conn.execute(f'DROP SCHEMA "{settings.database.schema}" CASCADE')
        await conn.close()
