"""Retrieval recall@k on an external suite: a question's gold passage is one that contains a reference
answer. Measures vector-only and hybrid (vector + full-text, reciprocal rank fusion) and prints Markdown.

    .venv/bin/python bench/retrieval_recall.py ../shared/benchmarks/squad2-normans [--k 4]
"""

from __future__ import annotations

import argparse
import asyncio
import json
from pathlib import Path

from bench.common import machine, scratch_store
from provenance.ingest.folder import ingest
from provenance.report import table
from provenance.services import load_embedder
from provenance.stages.retrieve import retrieve


async def main(suite: Path, ks: list[int]) -> str:
    cases = [json.loads(line) for line in (suite / "cases.jsonl").read_text().splitlines() if line.strip()]
    answerable = [c for c in cases if c["expect"] == "answer" and c.get("mustIncludeAny")]
    async with scratch_store() as (store, settings):
        embedder = load_embedder(settings)
        report = await ingest(store, suite / "corpus", lambda: embedder, settings.embedding.model)
        texts = {pid: (await store.passage(pid)) for pid in await store.stored_hashes()}
        gold = {
            c["id"]: {
                pid for pid, p in texts.items() if p and any(a.lower() in p.text.lower() for a in c["mustIncludeAny"])
            }
            for c in answerable
        }
        scored = [c for c in answerable if gold[c["id"]]]
        rows = []
        for mode in ("vector", "hybrid"):
            for k in ks:
                hits = 0
                for c in scored:
                    outcome = await retrieve(c["question"], embedder, store, k, mode, settings.embedding.model)
                    if gold[c["id"]] & {p.id for p in outcome.passages}:
                        hits += 1
                rows.append((mode, k, hits, len(scored)))
    lines = [
        f"Suite `{suite.name}`: {report.passages} passages, {len(answerable)} answerable questions "
        f"({len(scored)} whose reference answer occurs verbatim in some passage; those are scored). "
        f"Embedder `{settings.embedding.model}`. Machine: {machine()}.",
        "",
        *table(
            ("mode", "k", "hits", "questions", "recall@k"),
            "lrrrr",
            ([m, k, h, n, f"{h / n:.3f}"] for m, k, h, n in rows),
        ),
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("suite", type=Path)
    parser.add_argument("--k", default="1,2,4,8")
    args = parser.parse_args()
    print(asyncio.run(main(args.suite, [int(k) for k in args.k.split(",")])))
