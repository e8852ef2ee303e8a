"""`provenance db migrate`: apply pending migrations (and fill what an older database lacks)."""

from __future__ import annotations

import argparse
import asyncio

from provenance.cli import common
from provenance.cli.ingest import fill_sentences_now
from provenance.settings import Settings


async def migrate_database(settings: Settings) -> list[str]:
    from provenance.store.pool import create_pool, migrate, resolve_database_url

    pool = await create_pool(resolve_database_url(settings), settings)
    try:
        return await migrate(pool)
    finally:
        await pool.close()


def cmd_db_migrate(args: argparse.Namespace) -> int:
    settings = common.settings()
    applied = asyncio.run(migrate_database(settings))
    print("applied: " + ", ".join(applied) if applied else "database is up to date")
    fill_sentences_now(settings)
    return 0


def add(sub: common.Subparsers) -> None:
    db = sub.add_parser("db", help="database maintenance")
    db_sub = db.add_subparsers(dest="db_command", metavar="ACTION")
    db.set_defaults(func=common.usage(db))
    action = db_sub.add_parser("migrate", help="apply pending migrations from db/migrations")
    action.set_defaults(func=cmd_db_migrate)
