"""Retrieval on the crawled 18F handbook against the folder-ingested one (issue 46's recall target):
`python -m tests.sources.measure_recall`. Both corpora go into one throwaway embedded Postgres: the handbook's
folder through `ingest`, the test site (tests/sources/site_build.py) through `provenance sources sync`'s own
code. Each answerable case of evals/18f-handbook.jsonl is retrieved from both as the pipeline retrieves
(`stages.retrieve`'s hybrid search, k = 4), and scored as the evals score recall@4 (`retrieved_answer`).
`--answers` also asks each case of both corpora through the local pipeline (answered correctly, as the evals
score it) and prints the cases whose outcome differs.

Neither ingest computes sentence vectors (`ingest.folder._needs` is wrapped here to ask for none): recall@4 reads
passages only (the hybrid search over passage vectors and full text); the sentence vectors are the claim checks',
which this does not run, and they were 85% of what was embedded (6,556 sentences for 1,152 passages when a run
with them was stopped after 28 minutes on the shared machine)."""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from provenance.evaluation.cases import Case, load_jsonl
from provenance.evaluation.scoring import answer_right, retrieved_answer
from provenance.ingest import folder
from provenance.ingest.folder import ingest
from provenance.pipeline.door import Pipeline
from provenance.services import build_profile, load_embedder
from provenance.settings import REPO_ROOT, Settings
from provenance.sources.commands import add_site, sync_now
from provenance.stages.retrieve import VECTOR_WEIGHT, hybrid_pool
from provenance.store import Store
from provenance.store.embedded_pg import start_embedded
from provenance.store.pool import create_pool, migrate
from tests.sources.site_build import HANDBOOK, build
from tests.sources.site_server import SiteServer

K = 4


def _without_sentences() -> None:
    needs = folder._needs

    def passages_only(*args: Any) -> tuple[bool, bool]:
        return needs(*args)[0], False

    folder._needs = passages_only


async def ingest_both(pool: Any, store: Store, settings: Settings) -> None:
    embedder = load_embedder(settings, for_ingest=True)
    started = time.monotonic()
    await ingest(store, HANDBOOK, lambda: embedder, settings.embedding.model, settings.ingest.chunk_max_tokens,
                 corpus="folder")  # fmt: skip
    print(f"folder ingested in {time.monotonic() - started:.0f} s", flush=True)
    site = SiteServer(build())
    site.start()
    started = time.monotonic()
    await add_site(pool, "crawled", site.origin + "/handbook/about/", {"prefix": "/handbook/"})
    await sync_now(pool, settings, "crawled", lambda: embedder)
    print(f"site crawled and ingested in {time.monotonic() - started:.0f} s", flush=True)
    site.stop()


async def main(reuse: Path | None, answers: bool = False) -> None:
    """`reuse`: the database folder of an earlier run (printed first), whose two corpora are scored again."""
    _without_sentences()
    folder_ = reuse or Path(tempfile.mkdtemp(prefix="provenance-recall-")) / "pg"
    print(f"database: {folder_}", flush=True)
    dsn = start_embedded(folder_)
    settings = Settings().with_overrides(
        database_url=dsn, db_schema="recall", sources_delay_s=0.0, sources_allow_private=True, log_level="warning"
    )
    pool = await create_pool(dsn, settings)
    await migrate(pool)
    store = Store(pool)
    if reuse is None:
        await ingest_both(pool, store, settings)
    cases = [c for c in load_jsonl(REPO_ROOT / "evals" / "18f-handbook.jsonl", Case) if c.expect == "answer"]
    query_embedder = load_embedder(settings)
    hits = {"folder": 0, "crawled": 0}
    for case in cases:
        query = query_embedder.embed_query(case.question)
        for corpus in hits:
            found = await store.hybrid_search(
                query,
                case.question,
                K,
                pool_size=hybrid_pool(K),
                vector_weight=VECTOR_WEIGHT,
                corpus=corpus,
                exact=True,
            )
            hits[corpus] += bool(retrieved_answer([p.text for p in found], case.mustIncludeAny))
    async with pool.acquire() as conn:
        counts = dict(await conn.fetch("SELECT corpus, count(*) FROM passages GROUP BY corpus"))
    n = len(cases)
    print(f"passages: folder {counts.get('folder')}, crawled {counts.get('crawled')}")
    print(f"recall@{K}: folder {hits['folder']}/{n} = {hits['folder'] / n:.3f}, crawled {hits['crawled']}/{n} = "
          f"{hits['crawled'] / n:.3f}, ratio {hits['crawled'] / max(hits['folder'], 1):.3f}")  # fmt: skip
    if answers:
        await answered_correctly(settings, store, query_embedder, cases)
    await pool.close()


async def answered_correctly(settings: Settings, store: Store, embedder: Any, cases: list[Case]) -> None:
    pipeline = Pipeline(settings, store, embedder, build_profile(settings, embedder))
    await pipeline.corpora.refresh()
    right = {"folder": 0, "crawled": 0}
    for case in cases:
        got = {}
        for corpus in right:
            outcome = await pipeline.ask(
                case.question, request_id=f"recall-{corpus}-{case.id}", use_cache=False, corpus=corpus
            )
            r = outcome.response
            ok = r.status == "answered" and answer_right(
                case.bucket, r.answer, case.mustIncludeAny, case.mustNotInclude
            )
            right[corpus] += bool(ok)
            got[corpus] = f"{r.status} {r.reason or ''} {(r.answer or '')[:80]!r}"
        if len(set(got.values())) > 1:
            print(f"{case.id}: folder {got['folder']} | crawled {got['crawled']}")
    n = len(cases)
    print(f"answered correctly: folder {right['folder']}/{n}, crawled {right['crawled']}/{n}, "
          f"ratio {right['crawled'] / max(right['folder'], 1):.3f}")  # fmt: skip


if __name__ == "__main__":
    args = [a for a in sys.argv[1:] if a != "--answers"]
    asyncio.run(main(Path(args[0]) if args else None, answers="--answers" in sys.argv[1:]))
