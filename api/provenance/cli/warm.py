"""`provenance warm-cache`: answer each corpus's example questions now, so that they are cached."""

from __future__ import annotations

import argparse
import asyncio
import sys

from provenance.cli import common
from provenance.cli.common import Mistake
from provenance.settings import Settings


async def _warm_cache(settings: Settings, only: str | None) -> int:
    import uuid

    from provenance.guards.postgres import OperatorGuards
    from provenance.services import build_services

    if settings.guards.cache_ttl_s <= 0:
        raise Mistake("CACHE_TTL_S is 0, so nothing would be cached")
    if only is not None and await common.corpus_state(settings, only) is None:
        raise Mistake(f"there is no corpus named {only!r}")
    # The operator's own run: the cache and spend cap apply, the bot check and rate limit don't.
    services = await build_services(settings, guards=OperatorGuards)
    failed = 0
    try:
        # The questions the page offers: each served corpus's examples (see GET /corpora).
        corpora = [c for c in await services.store.corpora() if only is None or c.name == only]
        if only is not None and not corpora:  # removed meanwhile
            raise Mistake(f"there is no corpus named {only!r}")
        todo = [(c.name, str(e["question"])) for c in corpora for e in c.examples]
        if not todo:
            print("no example questions to warm: ingest a corpus first", file=sys.stderr)
        for corpus, question in todo:
            outcome = await services.pipeline.ask(question, request_id=f"warm-{uuid.uuid4().hex[:12]}", corpus=corpus)
            r = outcome.response
            if r.cached:
                how = "already cached"
            elif r.status == "blocked":
                how = f"{r.reason}; not cached"
                failed += 1
            else:
                how = f"cached now, {r.total_ms:.0f} ms"
            print(f"{r.status:<8} ({how}) {corpus}: {question}", flush=True)
    finally:
        await services.close()
    return 1 if failed else 0


def cmd_warm_cache(args: argparse.Namespace) -> int:
    return asyncio.run(_warm_cache(common.settings(), args.corpus))


def add(sub: common.Subparsers) -> None:
    warm = sub.add_parser("warm-cache", help="answer each corpus's example questions now so they are cached")
    warm.add_argument("--corpus", default=None, help="only this corpus's examples (default: every corpus's)")
    warm.set_defaults(func=cmd_warm_cache)
