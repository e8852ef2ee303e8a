"""A small corpus beside a large one in the same database: hybrid search for the small corpus through the
HNSW index over every corpus, and exactly (its own rows ranked, `exact=True`, what retrieval now does for a
corpus under HNSW_MIN_PASSAGES). Synthetic passages as bench/hybrid_scale.py writes them, in a schema of its
own (dropped afterwards); the questions are our eval questions, embedded by the real embedder.

    .venv/bin/python -m bench.exact_scan [--small 2000] [--large 100000]
"""

from __future__ import annotations

import argparse
import asyncio
import time

import numpy as np

from bench.common import percentile, scratch_store
from bench.hybrid_scale import corpus_words, eval_questions, synthetic
from bench.vector_scale import DIM
from provenance.services import load_embedder
from provenance.settings import load_settings
from provenance.stages.retrieve import VECTOR_WEIGHT, hybrid_pool
from provenance.store import Store
from provenance.store.corpora import CorpusDescription


async def write(store: Store, name: str, size: int, words: list[str], rng: np.random.Generator, model: str) -> None:
    centres = rng.standard_normal((500, DIM)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    chunks, embeddings = synthetic(size, rng, centres, words, name)
    about = CorpusDescription(name, None, "", "", [])
    await store.replace_corpus(chunks, embeddings, model, f"v{size}", f"fp{size}", [], about)


async def run(small: int, large: int) -> None:
    settings = load_settings()
    embedder = load_embedder(settings)
    questions, vectors = eval_questions(embedder)
    words = corpus_words()
    rng = np.random.default_rng(37)
    k = settings.retrieval.k
    async with scratch_store(settings) as (store, _):
        await write(store, "large", large, words, rng, settings.embedding.model)
        await write(store, "small", small, words, rng, settings.embedding.model)
        await store.ensure_hnsw_index()
        async with store.pool.acquire() as conn:
            await conn.execute("ANALYZE passages")
        found: dict[tuple[str, bool], list[list[str]]] = {}
        for corpus, exact in (("small", False), ("small", True), ("large", False)):
            ms: list[float] = []
            for _ in range(2):  # the first pass warms the caches; the second is measured
                ms, found[corpus, exact] = [], []
                for question, vector in zip(questions, vectors, strict=True):
                    started = time.perf_counter()
                    got = await store.hybrid_search(
                        vector,
                        question,
                        k,
                        pool_size=hybrid_pool(k),
                        vector_weight=VECTOR_WEIGHT,
                        corpus=corpus,
                        exact=exact,
                    )
                    ms.append((time.perf_counter() - started) * 1000)
                    found[corpus, exact].append([p.id for p in got])
            how = "exactly" if exact else "through the HNSW index"
            size, other = (small, large) if corpus == "small" else (large, small)
            print(
                f"{corpus} corpus ({size:,} passages, beside {other:,}), {how}: "
                f"p50 {percentile(ms, 0.5):.1f} ms, p95 {percentile(ms, 0.95):.1f} ms",
                flush=True,
            )
        same = sum(a == b for a, b in zip(found["small", False], found["small", True], strict=True))
        print(f"small corpus: the same top {k}, in the same order, for {same} of {len(questions)} questions")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--small", type=int, default=2000)
    parser.add_argument("--large", type=int, default=100_000)
    args = parser.parse_args()
    asyncio.run(run(args.small, args.large))


if __name__ == "__main__":
    main()
