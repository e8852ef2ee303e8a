"""Ingest's staging area against a real Postgres: sentences staged for a passage's old text are never served with
its new one (an upload's job stages the new passage without sentences, and embeds them after its switch)."""

from __future__ import annotations

import numpy as np

from provenance import text as T
from provenance.ingest.chunking import Chunk
from provenance.store import Store
from provenance.store.corpora import CorpusDescription, Staged

MODEL = "local/all-minilm-l6-v2-int8"


def vector(seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).standard_normal(384).astype(np.float32)
    return v / np.linalg.norm(v)


async def test_sentences_staged_for_an_old_text_are_not_served_when_the_passage_is_restaged_without_them(
    fresh_store: Store,
) -> None:
    segmenter = T.SEGMENTER_VERSION
    old = Chunk("a.md#hours", "a.md", "A > Hours", 0, "The shed opens at nine. It closes at five.", 10)
    new = Chunk("a.md#hours", "a.md", "A > Hours", 0, "Plots cost $40 a year.", 7)
    # An interrupted ingest staged the old text with its sentences; then the file changed, and a job staged the
    # new text with its vector alone.
    spans = T.sentence_spans(old.text)
    await fresh_store.stage(
        "c", MODEL, segmenter, [Staged(old, vector(1), [(a, b, vector(2 + i)) for i, (a, b) in enumerate(spans)])]
    )
    await fresh_store.stage("c", MODEL, segmenter, [Staged(new, vector(9), None)])
    about = CorpusDescription("c", None, "", "", [])
    await fresh_store.switch_corpus([new.id], MODEL, segmenter, "v1", "fp", [], about)
    served = await fresh_store.passage(new.id, "c")
    assert served is not None and served.text == new.text
    # No sentence of the old text: the pipeline splits the new one itself until its sentences are computed.
    assert await fresh_store.sentence_spans("c", segmenter, [new.id]) == {}
    assert await fresh_store.count_missing_sentences(segmenter, MODEL, "c") == 1
