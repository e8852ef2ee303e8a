"""What every command shares: the one-line mistake, the parser that reports its own errors in one line, the
settings and the database pool as a command opens them."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import asyncpg

if TYPE_CHECKING:
    from provenance.store.corpora import CorpusState

from provenance.errors import SettingsError
from provenance.logs import configure_logging
from provenance.settings import Settings, load_settings

# What a command group's `add(sub)` receives: argparse's subparsers action, whose type argparse keeps private.
Subparsers = Any


class Mistake(Exception):
    """A user's mistake (an argument, a name that doesn't exist, a setting that makes the command pointless):
    `main` prints it as one line on stderr and exits 2, never a traceback."""


class Parser(argparse.ArgumentParser):
    """argparse's own errors as one line too (`provenance serve: error: argument --port: invalid int value:
    'x'`), not its usage block and then the line."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def formats() -> str:
    """The formats ingest reads, as the help names them (from the readers themselves, so none is missed)."""
    from provenance.ingest.documents.read import SUFFIXES

    return ", ".join(SUFFIXES[:-1]) + f" and {SUFFIXES[-1]} files"


def settings() -> Settings:
    try:
        loaded = load_settings()
    except SettingsError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    # Logs go to stderr at the configured level, so a command's own output on stdout stays clean.
    configure_logging(loaded.server.log_level)
    return loaded


async def with_pool(settings: Settings) -> asyncpg.Pool:
    from provenance.store.pool import create_pool, migrate, resolve_database_url

    pool = await create_pool(resolve_database_url(settings), settings)
    await migrate(pool)
    return pool


async def corpus_state(settings: Settings, name: str) -> CorpusState | None:
    from provenance.store.corpora import CorpusStore

    pool = await with_pool(settings)
    try:
        return await CorpusStore(pool).corpus_state(name)
    finally:
        await pool.close()


async def corpus_folder(settings: Settings, name: str) -> Path | None:
    state = await corpus_state(settings, name)
    return Path(state.source_dir) if state and state.source_dir else None


def usage(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    """For a command group run without its action: its help, not argparse's "arguments are required: x"."""

    def show(args: argparse.Namespace) -> int:
        parser.print_help(sys.stderr)
        return 2

    return show


def check_corpus_name(name: str) -> None:
    from provenance.wire import valid_name

    if not valid_name(name):
        raise Mistake(
            f"corpus name {name!r}: use 1-40 lowercase letters, digits, '-' or '_', starting with a letter or digit"
        )
