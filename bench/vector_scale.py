"""Retrieval over synthetic corpora of 10k and 100k passages: exact scan against HNSW.

Vectors are clustered (points around 500 random centres), as real embeddings are; uniform noise would be
an unfair worst case for HNSW. Reports query latency (p50, p95) for both plans, HNSW recall@4 against the
exact result, and the index build time.

    .venv/bin/python -m bench.vector_scale [--sizes 10000,100000] [--queries 100]
"""

from __future__ import annotations

import argparse
import asyncio
import time

import numpy as np

from bench.common import machine, percentile, scratch_store
from provenance import report
from provenance.store.corpora import CorpusStore
from provenance.store.pool import MAINTENANCE_TIMEOUT_S

DIM = 384


def clustered(n: int, rng: np.random.Generator, centres: np.ndarray) -> np.ndarray:
    picks = centres[rng.integers(0, len(centres), n)]
    vectors = picks + 0.6 * rng.standard_normal((n, DIM)).astype(np.float32) / np.sqrt(DIM)
    normed: np.ndarray = (vectors / np.linalg.norm(vectors, axis=1, keepdims=True)).astype(np.float32)
    return normed


async def load(store: CorpusStore, vectors: np.ndarray) -> None:
    async with store.pool.acquire() as conn:
        await conn.copy_records_to_table(
            "passages",
            records=(
                (f"synthetic.md#p{i}", "synthetic.md", "Synthetic", i, f"passage {i}", 3, v, "synthetic", f"h{i}")
                for i, v in enumerate(vectors)
            ),
            columns=[
                "id", "source", "heading", "position", "text", "token_count", "embedding", "embedding_model",
                "content_hash",
            ],
            timeout=MAINTENANCE_TIMEOUT_S,  # 100k vectors take far longer than the pool's DB_TIMEOUT_S
        )  # fmt: skip
        await conn.execute("ANALYZE passages", timeout=MAINTENANCE_TIMEOUT_S)


async def timed_queries(store: CorpusStore, queries: np.ndarray, k: int) -> tuple[list[float], list[list[str]]]:
    latencies, results = [], []
    for q in queries:
        started = time.perf_counter()
        hits = await store.vector_search(q, k)
        latencies.append((time.perf_counter() - started) * 1000)
        results.append([h.id for h in hits])
    return latencies, results


async def measure(size: int, n_queries: int, k: int = 4) -> dict[str, float]:
    rng = np.random.default_rng(size)
    centres = rng.standard_normal((500, DIM)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    async with scratch_store() as (store, _):
        await load(store, clustered(size, rng, centres))
        queries = clustered(n_queries, rng, centres)
        await timed_queries(store, queries[:5], k)  # warm the buffer cache
        exact_ms, exact = await timed_queries(store, queries, k)
        started = time.perf_counter()
        await store.ensure_hnsw_index()
        build_s = time.perf_counter() - started
        async with store.pool.acquire() as conn:
            await conn.execute("ANALYZE passages", timeout=MAINTENANCE_TIMEOUT_S)
        await timed_queries(store, queries[:5], k)
        hnsw_ms, approx = await timed_queries(store, queries, k)
    recall = float(np.mean([len(set(a) & set(e)) / k for a, e in zip(approx, exact, strict=True)]))
    return {
        "size": size,
        "exact_p50": percentile(exact_ms, 0.5),
        "exact_p95": percentile(exact_ms, 0.95),
        "hnsw_p50": percentile(hnsw_ms, 0.5),
        "hnsw_p95": percentile(hnsw_ms, 0.95),
        "recall": recall,
        "build_s": build_s,
    }


def table(rows: list[dict[str, float]]) -> str:
    head = (
        "passages",
        "exact p50 ms",
        "exact p95 ms",
        "HNSW p50 ms",
        "HNSW p95 ms",
        "HNSW recall@4 vs exact",
        "index build s",
    )
    times = ("exact_p50", "exact_p95", "hnsw_p50", "hnsw_p95")
    out = [
        [f"{int(r['size']):,}", *(f"{r[t]:.1f}" for t in times), f"{r['recall']:.3f}", f"{r['build_s']:.1f}"]
        for r in rows
    ]
    return "\n".join(report.table(head, "rrrrrrr", out))


async def main(sizes: list[int], n_queries: int) -> str:
    rows = [await measure(size, n_queries) for size in sizes]
    return f"Machine: {machine()}.\n\n" + table(rows)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sizes", default="10000,100000")
    parser.add_argument("--queries", type=int, default=100)
    args = parser.parse_args()
    print(asyncio.run(main([int(s) for s in args.sizes.split(",")], args.queries)))
