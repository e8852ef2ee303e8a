"""`provenance ingest`: chunk, embed and store a folder, with glibc's allocator kept from hoarding."""

from __future__ import annotations

import argparse
import asyncio
import ctypes
from pathlib import Path

from provenance.cli import common
from provenance.cli.common import Mistake
from provenance.settings import Settings
from provenance.wire import DEFAULT_CORPUS


async def ingest_folder(settings: Settings, directory: Path, force: bool, corpus: str, replace: bool = False) -> str:
    from provenance.ingest.folder import ingest
    from provenance.services import load_embedder
    from provenance.store.corpora import CorpusStore

    pool = await common.with_pool(settings)
    try:
        report = await ingest(
            CorpusStore(pool),
            directory,
            lambda: load_embedder(settings, for_ingest=True),
            settings.embedding.model,
            settings.ingest.chunk_max_tokens,
            settings.retrieval.hnsw_min_passages,
            force=force,
            corpus=corpus,
            replace=replace,
        )
        return report.summary()
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


# glibc's mallopt parameters (malloc.h): the size from which a block is its own mmap, and the most arenas.
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
# glibc's default threshold, fixed: a block this large or larger is mapped, and unmapped when freed.
INGEST_MMAP_THRESHOLD = 128 * 1024


def bound_allocator(arenas: int = 2, mmap_threshold: int = INGEST_MMAP_THRESHOLD) -> bool:
    """Keep glibc malloc from holding what an ingest's embedding batches freed; False off glibc. For the
    one-shot ingest command only; the server keeps glibc's defaults.

    - The mmap threshold, fixed. By default glibc raises it to the size of each mapped block freed (up to
      32 MiB), so after onnxruntime's first batch its activations (24 MiB each at 32 x 128 tokens: 32 x 12
      heads x 128 x 128 floats) are carved from the heap instead, where the freed ones fragment and stay
      resident: one session run of 32 x 128 tokens peaked 570 MiB above the loaded session, against 100 MiB
      with the threshold fixed (setting it at all turns the adjustment off). Mapping each costs page faults,
      a few per cent of a run.
    - At most `arenas` arenas. glibc gives each allocating thread an arena of its own and keeps what each
      held at its peak: onnxruntime's threads kept 128 MiB more resident over an ingest."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    return bool(libc.mallopt(M_MMAP_THRESHOLD, mmap_threshold)) and bool(libc.mallopt(M_ARENA_MAX, arenas))


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
