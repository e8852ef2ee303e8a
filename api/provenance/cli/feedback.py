"""`provenance feedback`: readers' verdicts, counted, and exported as eval cases for review."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from provenance.cli import common
from provenance.cli.common import Mistake
from provenance.settings import Settings


async def _feedback(settings: Settings, args: argparse.Namespace) -> int:
    from provenance.feedback import cases
    from provenance.store import Store

    try:
        since = cases.parse_since(args.since) if args.since else None
    except ValueError as exc:
        raise Mistake(str(exc)) from None
    pool = await common.with_pool(settings)
    try:
        store = Store(pool)
        if args.feedback_command == "export":
            print(await cases.export(store, settings, Path(args.out), since, args.corpus))
        else:
            print(await cases.stats(store, since, args.corpus))
    finally:
        await pool.close()
    return 0


def cmd_feedback(args: argparse.Namespace) -> int:
    if args.feedback_command is None:
        result: int = args.usage(args)
        return result
    return asyncio.run(_feedback(common.settings(), args))


def add(sub: common.Subparsers) -> None:
    feedback = sub.add_parser("feedback", help='readers\' "Was this right?" verdicts: counts, and eval cases')
    feedback_sub = feedback.add_subparsers(dest="feedback_command", metavar="ACTION")
    export = feedback_sub.add_parser(
        "export", help="write the 'wrong' verdicts as eval cases for review (provenance evals --cases reads them)"
    )
    stats = feedback_sub.add_parser("stats", help="verdicts by verdict and kind, per corpus and per week")
    for action in (export, stats):
        action.add_argument("--since", default=None, metavar="DATE", help="only verdicts given since (UTC)")
        action.add_argument("--corpus", default=None, metavar="NAME", help="only verdicts on this corpus")
    export.add_argument("--out", required=True, metavar="FILE.jsonl", help="the cases file to write")
    feedback.set_defaults(func=cmd_feedback, usage=common.usage(feedback))
