"""How hybrid retrieval's fusion does on kept corpora, without the generator: recall@k of reciprocal rank
fusion and of the weighted sum of scaled scores (`stages/retrieve.py`) over a grid of weights and pools, fused
in Python from the two rankings the hybrid statement builds (the vector ranking exact, the text ranking by
`CorpusStore.text_ranking`), so a sweep costs seconds once the corpora are ingested.

    .venv/bin/python -m bench.fusion_sweep \\
        --suite recall_18f:../shared/corpora/18f-handbook/pages:evals/18f-handbook.jsonl \\
        --suite recall_ours:corpus:evals/cases.jsonl --suite recall_ours:corpus:evals/paraphrase.jsonl \\
        --suite recall_18f:../shared/corpora/18f-handbook/pages:evals/conversations.jsonl:conversations-18f

A suite is SCHEMA:CORPUS:CASES[:LABEL]; the schema is kept and ingested once (as `bench/retrieval_recall.py
--schema` keeps it), so suites over one corpus share it. docs/retrieval.md "Score fusion" has the full run.
A case counts at k when one of its top k passages holds one of its `mustIncludeAny` strings. A conversation
file (lines with `turns`) gives its answerable turns' standalone questions, each counting when
one of its gold `passages` is in the top k; only the conversations over CORPUS are read.
"""

from __future__ import annotations

import argparse
import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np

from bench.common import machine
from bench.retrieval_recall import kept_store
from provenance.evaluation.cases import load_cases
from provenance.evaluation.conversations import load_suite
from provenance.evaluation.scoring import retrieved_answer
from provenance.ingest.folder import ingest
from provenance.report import table
from provenance.services import load_embedder
from provenance.stages.retrieve import HYBRID_POOL, VECTOR_WEIGHT

TEXT_DEPTH = 200  # how much of the text ranking is read: deeper than any pool swept
KS = (1, 4, 8)


@dataclass(frozen=True)
class Question:
    id: str
    text: str
    must_include_any: list[str] | None = None
    passages: list[str] | None = None  # gold passage ids (conversation turns)


@dataclass(frozen=True)
class Ranked:
    """One question's two rankings, best first: every passage by cosine, and the text ranking's head."""

    question: Question
    vector: list[tuple[str, float]]
    text: list[tuple[str, float]]


def questions(cases: Path, corpus: str) -> list[Question]:
    if "turns" not in json.loads(cases.read_text().splitlines()[0]):
        return [
            Question(c.id, c.question, must_include_any=list(c.mustIncludeAny))
            for c in load_cases(cases)
            if c.expect == "answer" and c.mustIncludeAny
        ]
    return [
        Question(f"{c.id}-t{n}", turn.standalone_question, passages=turn.passages)
        for c in load_suite(cases)
        if Path(c.corpus).resolve() == Path(corpus).resolve()
        for n, turn in enumerate(c.turns, 1)
        if turn.expect == "answer" and turn.passages
    ]


async def rankings(schema: str, corpus: Path, cases: Path) -> tuple[int, list[Ranked], dict[str, str]]:
    """(passages, each question's rankings, passage id -> text)."""
    async with kept_store(schema) as (store, settings):
        embedder = load_embedder(settings)
        if not await store.stored_hashes():
            await ingest(store, corpus, lambda: embedder, settings.embedding.model, settings.ingest.chunk_max_tokens)
        ids, vectors, texts = await store.passage_vectors()
        matrix = np.stack(vectors)
        out = []
        for q in questions(cases, str(corpus)):
            cosines = matrix @ embedder.embed_query(q.text)
            order = np.argsort(-cosines, kind="stable")
            vector = [(ids[i], float(cosines[i])) for i in order]
            out.append(Ranked(q, vector, await store.text_ranking(q.text, TEXT_DEPTH)))
    return len(ids), out, dict(zip(ids, texts, strict=True))


def rrf(r: Ranked, constant: int, pool: int) -> list[str]:
    scores: dict[str, float] = {}
    for ranking in (r.vector[:pool], r.text[:pool]):
        for rank, (pid, _) in enumerate(ranking, 1):
            scores[pid] = scores.get(pid, 0.0) + 1.0 / (constant + rank)
    return sorted(scores, key=lambda pid: (-scores[pid], pid))


def weighted_fusion(rankings: Sequence[Sequence[tuple[str, float]]], weights: Sequence[float]) -> list[str]:
    """The hybrid statement's fusion (store/search.py): each ranking's (id, score) pairs scaled by the largest
    in size among them (0 where all are 0), summed with the rankings' weights, 0 for a ranking a passage is not
    in; ties by id. tests/store/test_hybrid_search.py holds the statement to it."""
    scores: dict[str, float] = {}
    for weight, ranking in zip(weights, rankings, strict=True):
        largest = max((abs(score) for _, score in ranking), default=0.0)
        for pid, score in ranking:
            scores[pid] = scores.get(pid, 0.0) + (weight * score / largest if largest > 0 else 0.0)
    return sorted(scores, key=lambda pid: (-scores[pid], pid))


def weighted(r: Ranked, weight: float, pool: int) -> list[str]:
    return weighted_fusion([r.vector[:pool], r.text[:pool]], [weight, 1 - weight])


def found(question: Question, top: list[str], texts: dict[str, str]) -> bool:
    if question.passages:
        return bool(set(top) & set(question.passages))
    return bool(retrieved_answer([texts[pid] for pid in top], question.must_include_any))


def vector_only(r: Ranked) -> list[str]:
    return [pid for pid, _ in r.vector]


VARIANTS: dict[str, Callable[[Ranked], list[str]]] = {
    "vector only": vector_only,
    "rank fusion, constant 10, pool 20 (before)": partial(rrf, constant=10, pool=20),
    **{
        f"weighted {w:.2f}, pool {pool}" + (" (kept)" if (w, pool) == (VECTOR_WEIGHT, HYBRID_POOL) else ""): partial(
            weighted, weight=w, pool=pool
        )
        for pool in (20, HYBRID_POOL)
        for w in (0.5, 0.6, 0.65, VECTOR_WEIGHT, 0.75, 0.8, 0.9)
    },
}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--suite", action="append", required=True, help="SCHEMA:CORPUS:CASES[:LABEL]")
    args = parser.parse_args()
    suites = []
    for spec in args.suite:
        schema, corpus, cases, *label = spec.split(":")
        n, ranked, texts = await rankings(schema, Path(corpus), Path(cases))
        suites.append((f"{label[0] if label else Path(cases).stem} ({len(ranked)}, {n} passages)", ranked, texts))
    print(f"Recall@{', '.join(map(str, KS))} per suite. Machine: {machine()}.\n")
    header = ("fusion", *(name for name, _, _ in suites))
    rows = []
    for variant, fuse in VARIANTS.items():
        cells = []
        for _, ranked, texts in suites:
            fused = [fuse(r) for r in ranked]
            cells.append(
                " / ".join(
                    str(sum(found(r.question, f[:k], texts) for r, f in zip(ranked, fused, strict=True))) for k in KS
                )
            )
        rows.append([variant, *cells])
    print("\n".join(table(header, "l" + "r" * len(suites), rows)))


if __name__ == "__main__":
    asyncio.run(main())
