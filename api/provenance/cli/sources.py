"""`provenance sources`: sites crawled into a corpus (provenance.sources.commands does the work)."""

from __future__ import annotations

import argparse
import asyncio

from provenance.cli import common
from provenance.cli.common import Mistake
from provenance.settings import Settings


async def _sources(settings: Settings, args: argparse.Namespace) -> int:
    from provenance.access.commands import CommandMistake
    from provenance.services import load_embedder
    from provenance.sources.commands import sources

    try:
        pool = await common.with_pool(settings)
        try:
            return await sources(pool, settings, args, lambda: load_embedder(settings, for_ingest=True))
        finally:
            await pool.close()
    except CommandMistake as exc:
        raise Mistake(str(exc)) from None


def cmd_sources(args: argparse.Namespace) -> int:
    if args.sources_command is None:
        result: int = args.usage(args)
        return result
    return asyncio.run(_sources(common.settings(), args))


def add(sub: common.Subparsers) -> None:
    from provenance.sources.commands import add_source_arguments

    sources = sub.add_parser("sources", help="sites crawled into a corpus: add, list, remove, sync")
    add_source_arguments(sources.add_subparsers(dest="sources_command", metavar="ACTION"))
    sources.set_defaults(func=cmd_sources, usage=common.usage(sources))
