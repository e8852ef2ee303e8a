"""`provenance ingest`: chunk, embed and store a folder, with glibc's allocator kept from hoarding."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from provenance.cli import common
from provenance.cli.common import Mistake
from provenance.ingest.memory import bound_allocator
from provenance.settings import Settings
from provenance.wire import DEFAULT_CORPUS


async def ingest_folder(settings: Settings, directory: Path, force: bool, corpus: str, replace: bool = False) -> str:
    """The folder's documents synced into the corpus, as the folder source's job (provenance.jobs.commands)."""
    from provenance.jobs import commands

    pool = await common.with_pool(settings)
    try:
        return await commands.ingest_folder(settings, pool, directory, corpus=corpus, force=force, replace=replace)
    finally:
        await pool.close()


async def _fill_sentences(settings: Settings) -> int:
    """Compute, once, the sentence and word vectors a database ingested before they were stored lacks."""
    from provenance.ingest.folder import fill_missing_sentences
    from provenance.services import load_embedder
    from provenance.store.corpora import CorpusStore

    pool = await common.with_pool(settings)
    try:
        return await fill_missing_sentences(
            CorpusStore(pool), lambda: load_embedder(settings, for_ingest=True), settings.embedding.model
        )
    finally:
        await pool.close()


def fill_sentences_now(settings: Settings) -> None:
    filled = asyncio.run(_fill_sentences(settings))
    if filled:
        print(f"computed the sentence vectors of {filled} stored passages (once; they are stored now)", flush=True)


def cmd_ingest(args: argparse.Namespace) -> int:
    settings = common.settings()
    bound_allocator()
    directory = Path(args.dir) if args.dir else settings.ingest.corpus_dir
    common.check_corpus_name(args.corpus)
    if not directory.is_dir():
        raise Mistake(f"corpus folder not found: {directory}")
    print(asyncio.run(ingest_folder(settings, directory, args.force, args.corpus, args.replace)))
    return 0


def add(sub: common.Subparsers) -> None:
    ingest = sub.add_parser("ingest", help=f"chunk, embed and store a folder of documents ({common.formats()})")
    ingest.add_argument("dir", nargs="?", default=None, help="folder to ingest (default: CORPUS_DIR or corpus/)")
    ingest.add_argument("--force", action="store_true", help="re-embed every passage")
    ingest.add_argument(
        "--corpus",
        default=DEFAULT_CORPUS,
        metavar="NAME",
        help="the corpus to ingest into, kept beside the others (default: default, what `serve --ingest` serves)",
    )
    ingest.add_argument(
        "--replace",
        action="store_true",
        help="let DIR replace a corpus that was ingested from another folder (says what it removed)",
    )
    ingest.set_defaults(func=cmd_ingest)
