"""The `provenance` command: serve, db migrate, ingest (and more as issues land)."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from provenance.errors import ConfigurationError
from provenance.settings import Settings, SettingsError, load_settings


def _settings() -> Settings:
    try:
        return load_settings()
    except SettingsError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None


async def _with_pool(settings: Settings):  # type: ignore[no-untyped-def]
    from provenance.db import create_pool, migrate, resolve_database_url

    pool = await create_pool(resolve_database_url(settings), settings)
    await migrate(pool)
    return pool


async def _migrate(settings: Settings) -> list[str]:
    from provenance.db import create_pool, migrate, resolve_database_url

    pool = await create_pool(resolve_database_url(settings), settings)
    try:
        return await migrate(pool)
    finally:
        await pool.close()


async def _ingest(settings: Settings, directory: Path, force: bool) -> str:
    from provenance.ingest import ingest
    from provenance.services import load_embedder
    from provenance.store import Store

    pool = await _with_pool(settings)
    try:
        report = await ingest(
            Store(pool),
            directory,
            lambda: load_embedder(settings),
            settings.embed_model,
            settings.chunk_max_tokens,
            settings.hnsw_min_passages,
            force=force,
        )
        return report.summary()
    finally:
        await pool.close()


def cmd_db_migrate(args: argparse.Namespace) -> int:
    applied = asyncio.run(_migrate(_settings()))
    print("applied: " + ", ".join(applied) if applied else "database is up to date")
    return 0


def cmd_ingest(args: argparse.Namespace) -> int:
    settings = _settings()
    directory = Path(args.dir) if args.dir else settings.corpus_dir
    print(asyncio.run(_ingest(settings, directory, args.force)))
    return 0


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    settings = _settings()
    host = args.host or settings.host
    port = args.port or settings.port
    if settings.database_url is None:
        # Start the embedded server here, in the parent, so that every worker joins one Postgres and
        # Ctrl-C on this process stops it cleanly.
        from provenance.embedded_pg import start_embedded

        os.environ["DATABASE_URL"] = start_embedded(settings.pg_data_dir)
        settings = _settings()
    if args.ingest:
        print(asyncio.run(_ingest(settings, settings.corpus_dir, force=False)), flush=True)
    else:
        asyncio.run(_migrate(settings))
    print(f"serving on http://{host}:{port} (profile {settings.profile}); Ctrl-C stops", flush=True)
    uvicorn.run(
        "provenance.app:create_app",
        factory=True,
        host=host,
        port=port,
        workers=args.workers,
        log_level="warning",
        access_log=False,
        timeout_keep_alive=5,
        timeout_graceful_shutdown=5,
    )
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="provenance", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    serve = sub.add_parser("serve", help="run the HTTP API and the web page")
    serve.add_argument("--host", default=None, help="bind address (default: HOST or 127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, help="port (default: PORT or 8000)")
    serve.add_argument("--workers", type=int, default=1, help="uvicorn worker processes")
    serve.add_argument("--ingest", action="store_true", help="ingest CORPUS_DIR first when it changed")
    serve.set_defaults(func=cmd_serve)

    db = sub.add_parser("db", help="database maintenance")
    db_sub = db.add_subparsers(dest="db_command", required=True)
    migrate = db_sub.add_parser("migrate", help="apply pending migrations from db/migrations")
    migrate.set_defaults(func=cmd_db_migrate)

    ingest = sub.add_parser("ingest", help="chunk, embed and store a folder of .md/.txt files")
    ingest.add_argument(
        "dir", nargs="?", default=None, help="folder to ingest (default: CORPUS_DIR or corpus/)"
    )
    ingest.add_argument("--force", action="store_true", help="re-embed every passage")
    ingest.set_defaults(func=cmd_ingest)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        result: int = args.func(args)
        return result
    except ConfigurationError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130
