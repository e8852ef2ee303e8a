"""`provenance corpora`: list, create and remove corpora."""

from __future__ import annotations

import argparse
import asyncio
import sys

from provenance.cli import common
from provenance.cli.common import Mistake
from provenance.settings import Settings
from provenance.wire import DEFAULT_CORPUS


async def _create_corpus(settings: Settings, args: argparse.Namespace) -> int:
    from provenance.access.commands import CommandMistake, check_corpus_name, create_corpus

    try:
        check_corpus_name(args.name)
        pool = await common.with_pool(settings)
        try:
            return await create_corpus(pool, args.name, args.private, args.title)
        finally:
            await pool.close()
    except CommandMistake as exc:
        raise Mistake(str(exc)) from None


async def _list_corpora(settings: Settings) -> int:
    from provenance.store.corpora import CorpusStore

    pool = await common.with_pool(settings)
    try:
        corpora = await CorpusStore(pool).corpora()
    finally:
        await pool.close()
    if not corpora:
        print("no corpora: `provenance ingest DIR --corpus NAME` adds one")
        return 0
    rows = [("NAME", "PASSAGES", "MODEL", "VERSION", "INGESTED", "FOLDER")] + [
        (
            c.name,
            str(c.passage_count),
            c.embedding_model,
            c.version,
            f"{c.ingested_at:%Y-%m-%d %H:%M}",
            c.source_dir or "(not recorded)",
        )
        for c in corpora
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for r in rows:
        print("  ".join([*(v.ljust(w) for v, w in zip(r, widths, strict=False)), r[-1]]).rstrip())
    return 0


async def _remove_corpus(settings: Settings, name: str, yes: bool, force: bool) -> int:
    from provenance.access.store import AccessStore
    from provenance.store.corpora import CorpusStore

    if name == DEFAULT_CORPUS and not force:
        raise Mistake(
            f"{DEFAULT_CORPUS!r} is what `provenance serve --ingest` serves (and ingests again from "
            "CORPUS_DIR); pass --force to remove it anyway"
        )
    pool = await common.with_pool(settings)
    try:
        store = CorpusStore(pool)
        access = AccessStore(pool)
        state = await store.corpus_state(name)
        if state is None and await access.forget_corpus(name):
            print(f"removed corpus {name}: it held no documents yet")
            return 0
        if state is None:
            known = ", ".join(c.name for c in await store.corpora()) or "none"
            raise Mistake(f"there is no corpus named {name!r} (corpora: {known})")
        if not yes:
            folder = state.source_dir or "an unrecorded folder"
            prompt = (
                f"remove corpus {name} ({state.passage_count} passages from {folder}) with its sentence vectors "
                "and cached answers? [y/N] "
            )
            try:
                answer = await asyncio.to_thread(input, prompt)
            except EOFError:
                answer = ""
            if answer.strip().lower() not in ("y", "yes"):
                print("nothing removed", file=sys.stderr)
                return 1
        removed = await store.remove_corpus(name)
        # Its visibility and the grants on it go with it: a corpus made later under the name starts afresh.
        await access.forget_corpus(name)
    finally:
        await pool.close()
    if removed is None:  # removed by someone else meanwhile
        raise Mistake(f"there is no corpus named {name!r}")
    print(
        f"removed corpus {name}: {removed.passages} passages, {removed.sentences} sentence vectors, "
        f"{removed.cached_answers} cached answers"
    )
    return 0


def cmd_corpora(args: argparse.Namespace) -> int:
    settings = common.settings()
    if args.corpora_command == "remove":
        return asyncio.run(_remove_corpus(settings, args.name, args.yes, args.force))
    if args.corpora_command == "create":
        return asyncio.run(_create_corpus(settings, args))
    return asyncio.run(_list_corpora(settings))


def add(sub: common.Subparsers) -> None:
    corpora = sub.add_parser("corpora", help="list the corpora (folder, passages, model, version, ingest time)")
    corpora_sub = corpora.add_subparsers(dest="corpora_command", metavar="ACTION")
    corpora_sub.add_parser("list", help="the same as `provenance corpora`")
    create = corpora_sub.add_parser("create", help="create a corpus before adding documents; public unless --private")
    create.add_argument("name", help="lowercase letters, digits, _ and -")
    create.add_argument("--private", action="store_true", help="only keys granted it (and admins) can see it")
    create.add_argument("--title", default=None, help="what the page calls it (default: from its documents)")
    remove = corpora_sub.add_parser(
        "remove", help="remove a corpus: its passages, their sentence vectors and its cached answers"
    )
    remove.add_argument("name", help="the corpus, as `provenance corpora` lists it")
    remove.add_argument("--yes", action="store_true", help="remove without asking")
    remove.add_argument("--force", action="store_true", help=f"needed to remove {DEFAULT_CORPUS!r}")
    corpora.set_defaults(func=cmd_corpora)
