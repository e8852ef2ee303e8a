"""Hybrid search at 2k, 20k and 100k passages, with the corpus's common lexemes left out of the text query
(db/migrations/009) and without (the table emptied, as before it): the cost issue 34 measured growing with
the corpus (uncached /ask p50 137 ms at 2k, 751 ms at 100k).

Synthetic passages as bench/corpus_scale.py writes them (30 words drawn from corpus/'s vocabulary, clustered
vectors), through the staging area and the switch, in a schema of its own (dropped afterwards); the questions
are our eval questions, embedded by the real embedder. Prints one line per size and variant.

    .venv/bin/python -m bench.hybrid_scale [--sizes 2000,20000,100000]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import time

import numpy as np

from bench.common import percentile, scratch_store
from bench.vector_scale import DIM, clustered
from provenance.claims.vectors import vocabulary_words
from provenance.inference.embedder import Embedder
from provenance.ingest.chunking import Chunk
from provenance.services import load_embedder
from provenance.settings import REPO_ROOT, load_settings
from provenance.stages.retrieve import VECTOR_WEIGHT, hybrid_pool
from provenance.store.corpora import CorpusDescription

CORPUS = "scale"


def eval_questions(embedder: Embedder) -> tuple[list[str], list[np.ndarray]]:
    """Forty of our eval questions (answerable and unanswerable) and their vectors."""
    cases = [json.loads(line) for line in (REPO_ROOT / "evals" / "cases.jsonl").read_text().splitlines() if line]
    questions = [c["question"] for c in cases if c.get("bucket") in ("answerable", "unanswerable")][:40]
    return questions, [embedder.embed_query(q) for q in questions]


def corpus_words() -> list[str]:
    return sorted(set().union(*(vocabulary_words(p.read_text()) for p in (REPO_ROOT / "corpus").glob("*.md"))))


def synthetic(
    size: int, rng: np.random.Generator, centres: np.ndarray, words: list[str], folder: str
) -> tuple[list[Chunk], dict[str, np.ndarray]]:
    """`size` passages of 30 of corpus/'s words each, with clustered vectors, as ingest would stage them."""
    found = clustered(size, rng, centres)
    chunks, embeddings = [], {}
    for n in range(size):
        text = " ".join(rng.choice(words, 30)).capitalize() + "."
        source = f"{folder}/{n // 100}.md"
        chunk = Chunk(f"{source}#p{n}", source, f"Synthetic {n}", n, text, 40)
        chunks.append(chunk)
        embeddings[chunk.id] = found[n]
    return chunks, embeddings


async def run(sizes: list[int]) -> None:
    settings = load_settings()
    embedder = load_embedder(settings)
    questions, vectors = eval_questions(embedder)
    words = corpus_words()
    rng = np.random.default_rng(34)
    centres = rng.standard_normal((500, DIM)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    k = settings.retrieval.k
    about = CorpusDescription(CORPUS, None, "", "", [])
    async with scratch_store(settings) as (store, _):
        for size in sizes:
            chunks, embeddings = synthetic(size, rng, centres, words, "synthetic")
            await store.replace_corpus(chunks, embeddings, settings.embedding.model, f"v{size}", f"fp{size}", [], about)
            await store.ensure_hnsw_index()
            async with store.pool.acquire() as conn:
                await conn.execute("ANALYZE passages")
                common = await conn.fetch("SELECT lexeme, passages FROM common_lexemes WHERE corpus = $1", CORPUS)
            for variant in ("common lexemes left out", "every lexeme (before)"):
                if variant.startswith("every"):
                    async with store.pool.acquire() as conn:
                        await conn.execute("DELETE FROM common_lexemes WHERE corpus = $1", CORPUS)
                ms = []
                for question, vector in zip(questions, vectors, strict=True):
                    started = time.perf_counter()
                    # As the retrieve stage asks it.
                    await store.hybrid_search(
                        vector, question, k, pool_size=hybrid_pool(k), vector_weight=VECTOR_WEIGHT, corpus=CORPUS
                    )
                    ms.append((time.perf_counter() - started) * 1000)
                p50, p95 = percentile(ms, 0.5), percentile(ms, 0.95)
                print(
                    f"{size:>7,} passages, {variant}: p50 {p50:.1f} ms, p95 {p95:.1f} ms"
                    f" ({len(common)} common lexemes)",
                    flush=True,
                )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sizes", default="2000,20000,100000")
    args = parser.parse_args()
    asyncio.run(run([int(s) for s in args.sizes.split(",") if s]))


if __name__ == "__main__":
    main()
