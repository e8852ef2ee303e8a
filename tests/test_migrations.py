import asyncpg

from provenance.db import create_pool, migrate, migration_files
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
                    settings.db_schema,
                )
            }
            assert {
                "passages",
                "answer_cache",
                "rate_limits",
                "spend_ledger",
                "corpus_state",
                "api_keys",
            } <= tables
            ext = await conn.fetchval("SELECT extversion FROM pg_extension WHERE extname = 'vector'")
            assert ext is not None
    finally:
        await pool.close()
        conn = await asyncpg.connect(pg_dsn)
        await conn.execute(f'DROP SCHEMA "{settings.db_schema}" CASCADE')
        await conn.close()
