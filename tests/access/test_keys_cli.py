"""`provenance keys` with roles and grants, `provenance corpora create`, and keys made before roles existed,
against a real Postgres."""

from __future__ import annotations

import shutil
import uuid
from pathlib import Path

import asyncpg
import pytest

from provenance.access.store import AccessStore
from provenance.cli import main
from provenance.store.pool import MIGRATIONS_DIR, create_pool, migrate, migration_files
from tests.conftest import make_settings
from tests.reliability.support import drop_schema


@pytest.fixture
def cli_schema(pg_dsn: str, data_dir: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    schema = f"t_{uuid.uuid4().hex[:10]}"
    monkeypatch.setenv("DATABASE_URL", pg_dsn)
    monkeypatch.setenv("DB_SCHEMA", schema)
    monkeypatch.setenv("DATA_DIR", str(data_dir))
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    return schema


async def _keys(pg_dsn: str, data_dir: Path, schema: str) -> dict[str, tuple[str, dict[str, str]]]:
    pool = await create_pool(pg_dsn, make_settings(pg_dsn, data_dir, schema=schema))
    try:
        return {k.name: (k.role, dict(k.grants)) for k in await AccessStore(pool).keys()}
    finally:
        await pool.close()


async def test_keys_get_roles_and_grants_and_corpora_are_created_public_or_private(
    cli_schema: str, pg_dsn: str, data_dir: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    try:
        assert await _run(["corpora", "create", "hr", "--private", "--title", "HR handbook"]) == 0
        assert "created private corpus hr" in capsys.readouterr().out
        assert await _run(["corpora", "create", "hr"]) == 2
        assert "exists already" in capsys.readouterr().err
        assert await _run(["corpora", "create", "Not A Name"]) == 2

        assert await _run(["keys", "create", "plain"]) == 0
        assert await _run(["keys", "create", "hr-bot", "--role", "editor", "--corpus", "hr", "--corpus", "ops"]) == 0
        out = capsys.readouterr()
        # The key alone on stdout, as before roles.
        assert [line.startswith("pv_") for line in out.out.splitlines()] == [True, True]
        assert await _run(["keys", "create", "root", "--role", "admin"]) == 0
        capsys.readouterr()
        keys = await _keys(pg_dsn, data_dir, cli_schema)
        assert keys == {
            "plain": ("reader", {}),
            "hr-bot": ("editor", {"hr": "editor", "ops": "editor"}),
            "root": ("admin", {}),
        }

        assert await _run(["keys", "grant", "plain", "--corpus", "hr"]) == 0
        assert await _run(["keys", "grant", "hr-bot", "--corpus", "ops", "--role", "reader"]) == 0
        assert await _run(["keys", "ungrant", "hr-bot", "--corpus", "hr"]) == 0
        assert await _run(["keys", "ungrant", "hr-bot", "--corpus", "hr"]) == 2
        assert await _run(["keys", "grant", "nobody", "--corpus", "hr"]) == 2
        assert await _run(["keys", "grant", "plain", "--corpus", "../x"]) == 2
        keys = await _keys(pg_dsn, data_dir, cli_schema)
        assert keys["plain"] == ("reader", {"hr": "reader"})
        assert keys["hr-bot"] == ("editor", {"ops": "reader"})

        assert await _run(["keys", "revoke", "plain"]) == 0
        assert await _run(["keys", "grant", "plain", "--corpus", "ops"]) == 2  # a revoked key gets nothing new
        capsys.readouterr()
        assert await _run(["keys", "list"]) == 0
        listed = capsys.readouterr().out
        assert "hr-bot\teditor\t" in listed and "grants: ops (reader)" in listed and "revoked" in listed
        with pytest.raises(SystemExit):
            main(["keys", "create", "x", "--role", "owner"])

        # Removing a corpus takes its grants and its visibility with it.
        assert await _run(["corpora", "remove", "hr", "--yes"]) == 0
        assert (await _keys(pg_dsn, data_dir, cli_schema))["plain"] == ("reader", {})
    finally:
        await drop_schema(pg_dsn, cli_schema)


async def _run(argv: list[str]) -> int:
    import asyncio

    # main() runs its own event loop: off this test's loop, in a thread.
    return await asyncio.to_thread(main, argv)


async def test_keys_made_before_roles_existed_become_readers(pg_dsn: str, data_dir: Path, tmp_path: Path) -> None:
    settings = make_settings(pg_dsn, data_dir)
    before = tmp_path / "migrations"
    before.mkdir()
    for path in migration_files():
        if path.name < "012":
            shutil.copy(path, before / path.name)
    pool = await create_pool(pg_dsn, settings)
    try:
        await migrate(pool, before)
        async with pool.acquire() as conn:
            await conn.execute("INSERT INTO api_keys (name, key_hash) VALUES ('old-app', 'abc')")
        await migrate(pool, MIGRATIONS_DIR)
        keys = await AccessStore(pool).keys()
        assert [(k.name, k.role, k.grants) for k in keys] == [("old-app", "reader", {})]
        async with pool.acquire() as conn:
            with pytest.raises(asyncpg.CheckViolationError):
                await conn.execute("UPDATE api_keys SET role = 'owner'")
    finally:
        await pool.close()
        await drop_schema(pg_dsn, settings.database.schema)
