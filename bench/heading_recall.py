"""Recall@k with each passage's whole heading path embedded and indexed beside its text, against the
two-level heading (title > `##`) ingest used before issue 33: the same passages, the same retrieval, only
the heading string differs. A third variant, `merged`, asks whether a `###` should bound a passage at all:
deeper sections stay inside their `##` passage (as before issue 33, their heading a "Name." line of the
text), with the two-level breadcrumb.

    .venv/bin/python -m bench.heading_recall [--corpus DIR] [--cases FILE] [--k 4] [--variants full,two-level,merged]

A case counts when one of the k retrieved passages holds one of its `mustIncludeAny` strings (as
`provenance evals` reports recall@k). Each variant is ingested into a schema of its own, dropped afterwards.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import uuid
from collections.abc import Sequence
from pathlib import Path

from provenance.evaluation.cases import load_cases
from provenance.evaluation.scoring import retrieved_answer
from provenance.ingest import chunking
from provenance.ingest import folder as ingest_module
from provenance.ingest.chunking import Chunk
from provenance.ingest.documents.blocks import BLANK, Block
from provenance.services import load_embedder
from provenance.settings import REPO_ROOT, load_settings
from provenance.stages.retrieve import retrieve
from provenance.store.corpora import CorpusStore
from provenance.store.pool import MAINTENANCE_TIMEOUT_S, create_pool, migrate, resolve_database_url

CHUNK_BLOCKS = "chunk_blocks"

HANDBOOK = REPO_ROOT.parent / "shared" / "corpora" / "18f-handbook" / "pages"


def two_level(chunks: Sequence[Chunk]) -> list[Chunk]:
    return [dataclasses.replace(c, heading=" > ".join(c.heading.split(" > ")[:2])) for c in chunks]


def merged(sections: list[chunking._Section]) -> list[chunking._Section]:
    """Each `##` group as one section: its deeper headings become "Name." lines, as before issue 33."""
    out: list[chunking._Section] = []
    for section in sections:
        deeper = section.path[section.group_depth :]
        lines = [Block(f"{' > '.join(deeper)}."), BLANK, *section.lines] if deeper else list(section.lines)
        if out and out[-1].group == section.group:
            out[-1].lines.extend([BLANK, *lines])
        else:
            out.append(
                chunking._Section(section.path[: section.group_depth], lines, section.group, section.group_depth)
            )
    return out


async def recall(corpus: Path, cases_path: Path, k: int, variant: str) -> tuple[int, int, list[str], int]:
    settings = load_settings()
    embedder = load_embedder(settings)
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    eval_settings = settings.with_overrides(db_schema=schema)
    dsn = resolve_database_url(eval_settings)
    pool = await create_pool(dsn, eval_settings)
    # ingest imported chunk_blocks by name, so the variant replaces ingest's own reference to it.
    chunk_blocks, sections = getattr(ingest_module, CHUNK_BLOCKS), chunking._sections
    if variant == "two-level":
        setattr(ingest_module, CHUNK_BLOCKS, lambda *a, **kw: two_level(chunk_blocks(*a, **kw)))
    elif variant == "merged":
        chunking._sections = lambda *a, **kw: merged(sections(*a, **kw))
    try:
        await migrate(pool)
        store = CorpusStore(pool)
        report = await ingest_module.ingest(
            store, corpus, lambda: embedder, settings.embedding.model, settings.ingest.chunk_max_tokens
        )
        cases = [c for c in load_cases(cases_path) if c.expect == "answer" and c.mustIncludeAny]
        missed = []
        for case in cases:
            got = await retrieve(case.question, embedder, store, k, settings.retrieval.mode, settings.embedding.model)
            if not retrieved_answer([p.text for p in got.passages], case.mustIncludeAny):
                missed.append(case.id)
        return len(cases) - len(missed), len(cases), missed, report.passages
    finally:
        setattr(ingest_module, CHUNK_BLOCKS, chunk_blocks)
        chunking._sections = sections
        await pool.close()
        conn_pool = await create_pool(dsn, settings)
        async with conn_pool.acquire() as conn:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE', timeout=MAINTENANCE_TIMEOUT_S)
        await conn_pool.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", type=Path, default=HANDBOOK)
    parser.add_argument("--cases", type=Path, default=REPO_ROOT / "evals" / "18f-handbook.jsonl")
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--variants", default="full,two-level,merged")
    args = parser.parse_args()
    for variant in args.variants.split(","):
        hit, n, missed, passages = asyncio.run(recall(args.corpus, args.cases, args.k, variant))
        print(
            f"{variant}: {passages} passages, recall@{args.k} {hit}/{n} ({100 * hit / n:.1f}%);"
            f" missed: {', '.join(missed) or 'none'}",
            flush=True,
        )


if __name__ == "__main__":
    main()
