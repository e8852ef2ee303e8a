"""Retrieval recall@k without the generator: a case counts at k when one of its top k passages holds one of
its `mustIncludeAny` strings (case and line breaks aside), as `provenance evals` reports recall@k. Measures
vector-only and hybrid (vector + full-text, reciprocal rank fusion) retrieval and prints Markdown.

    .venv/bin/python -m bench.retrieval_recall ../shared/benchmarks/squad2-normans     # its corpus/, cases.jsonl
    .venv/bin/python -m bench.retrieval_recall --corpus corpus --cases evals/cases.jsonl [--k 1,4,8]
        [--modes vector,hybrid] [--schema NAME]

`--schema NAME` keeps the ingested corpus in that schema and reads it again on the next run (ingesting only
while it is empty), so a change to retrieval costs seconds to measure instead of an ingest (minutes for the
18F handbook on two shared cores). The kept corpus is not compared with the folder: after a change to the
corpus or to ingest, drop the schema. Without it a scratch schema is made and dropped. Retrieval is ranked
exactly below `HNSW_MIN_PASSAGES`, as the pipeline ranks it.
"""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

from bench.common import machine, scratch_store
from provenance.evaluation.cases import Case, load_cases
from provenance.evaluation.scoring import retrieved_answer
from provenance.ingest.folder import ingest
from provenance.report import table
from provenance.services import load_embedder
from provenance.settings import RetrievalMode, Settings, load_settings
from provenance.stages.retrieve import retrieve
from provenance.store import Store
from provenance.store.pool import create_pool, migrate, resolve_database_url


@asynccontextmanager
async def kept_store(schema: str) -> AsyncIterator[tuple[Store, Settings]]:
    """The store of a schema that outlives the run (made and migrated when new)."""
    settings = load_settings().with_overrides(db_schema=schema, log_level="warning")
    pool = await create_pool(resolve_database_url(settings), settings)
    await migrate(pool)
    try:
        yield Store(pool), settings
    finally:
        await pool.close()


async def measure(
    corpus: Path, cases: list[Case], ks: list[int], modes: list[RetrievalMode], schema: str | None
) -> tuple[int, list[tuple[RetrievalMode, int, list[str]]]]:
    """(passages, [(mode, k, the ids of the cases missed at k)])."""
    answerable = [c for c in cases if c.expect == "answer" and c.mustIncludeAny]
    async with kept_store(schema) if schema else scratch_store() as (store, settings):
        embedder = load_embedder(settings)
        passages = len(await store.stored_hashes())
        if not passages:
            report = await ingest(
                store, corpus, lambda: embedder, settings.embedding.model, settings.ingest.chunk_max_tokens
            )
            passages = report.passages
        exact = passages < settings.retrieval.hnsw_min_passages
        rows: list[tuple[RetrievalMode, int, list[str]]] = []
        for mode in modes:
            for k in ks:
                missed = []
                for c in answerable:
                    got = await retrieve(c.question, embedder, store, k, mode, settings.embedding.model, exact=exact)
                    if not retrieved_answer([p.text for p in got.passages], c.mustIncludeAny):
                        missed.append(c.id)
                rows.append((mode, k, missed))
    return passages, rows


def render(corpus: Path, cases_path: Path, n: int, passages: int, rows: list[tuple[str, int, list[str]]]) -> str:
    return "\n".join(
        [
            f"Corpus `{corpus}` ({passages} passages), cases `{cases_path}`: {n} answerable with reference strings."
            f" Embedder `{load_settings().embedding.model}`. Machine: {machine()}.",
            "",
            *table(
                ("mode", "k", "hits", "recall@k", "missed"),
                "lrrrl",
                (
                    [m, k, f"{n - len(missed)}/{n}", f"{(n - len(missed)) / n:.1%}", ", ".join(missed) or "none"]
                    for m, k, missed in rows
                ),
            ),
        ]
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("suite", type=Path, nargs="?", help="a folder with corpus/ and cases.jsonl")
    parser.add_argument("--corpus", type=Path)
    parser.add_argument("--cases", type=Path)
    parser.add_argument("--k", default="1,4,8")
    parser.add_argument("--modes", default="vector,hybrid")
    parser.add_argument("--schema", help="keep the ingested corpus in this schema and reuse it")
    args = parser.parse_args()
    corpus = args.corpus or (args.suite / "corpus" if args.suite else None)
    cases_path = args.cases or (args.suite / "cases.jsonl" if args.suite else None)
    if corpus is None or cases_path is None:
        parser.error("give a suite folder, or --corpus and --cases")
    cases = load_cases(cases_path)
    modes: list[RetrievalMode] = [m for m in ("vector", "hybrid") if m in args.modes.split(",")]
    passages, rows = asyncio.run(measure(corpus, cases, [int(k) for k in args.k.split(",")], modes, args.schema))
    n = sum(1 for c in cases if c.expect == "answer" and c.mustIncludeAny)
    print(render(corpus, cases_path, n, passages, list(rows)))


if __name__ == "__main__":
    main()
