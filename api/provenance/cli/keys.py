"""`provenance keys`: API keys for clients without a browser (provenance.access.commands does the work)."""

from __future__ import annotations

import argparse
import asyncio

from provenance.cli import common
from provenance.cli.common import Mistake
from provenance.settings import Settings


async def _keys(settings: Settings, args: argparse.Namespace) -> int:
    from provenance.access.commands import CommandMistake, check_key_arguments, keys

    try:
        check_key_arguments(args)  # before the database is opened
        pool = await common.with_pool(settings)
        try:
            return await keys(pool, args)
        finally:
            await pool.close()
    except CommandMistake as exc:
        raise Mistake(str(exc)) from None


def cmd_keys(args: argparse.Namespace) -> int:
    if args.keys_command is None:
        result: int = args.usage(args)
        return result
    return asyncio.run(_keys(common.settings(), args))


def add(sub: common.Subparsers) -> None:
    keys = sub.add_parser("keys", help="API keys for clients without a browser (Authorization: Bearer)")
    keys_sub = keys.add_subparsers(dest="keys_command", metavar="ACTION")
    from provenance.access.commands import add_key_arguments

    add_key_arguments(keys_sub)
    keys.set_defaults(func=cmd_keys, usage=common.usage(keys))
