"""The retrieval stage (stages/retrieve.py) on the real database and embedder."""

from __future__ import annotations

import pytest

from provenance.errors import ModelMismatch, ServiceError
from provenance.inference.embedder import Embedder
from provenance.services import Services
from provenance.stages.retrieve import hybrid_pool, retrieve
from provenance.store import Store
from tests.store.test_hybrid_search import python_hybrid


def _check_passages(outcome, k: int) -> None:  # type: ignore[no-untyped-def]
    assert len(outcome.passages) == k
    ids = [p.id for p in outcome.passages]
    assert len(set(ids)) == k
    assert all(-1.0 <= p.score <= 1.0 for p in outcome.passages)
    stage = outcome.stage
    assert stage.status == "ok" and stage.k == k and stage.ms >= 0
    assert stage.embed_ms is not None and 0 <= stage.embed_ms <= stage.ms
    assert [p.id for p in stage.passages] == ids
    assert [p.score for p in stage.passages] == [round(p.score, 4) for p in outcome.passages]


async def test_retrieve_vector(corpus_services: Services) -> None:
    s = corpus_services
    outcome = await retrieve(
        "How much does a standard locker cost per month?", s.embedder, s.store, 5, "vector", s.pipeline.corpora.model
    )
    _check_passages(outcome, 5)
    assert outcome.stage.mode == "vector" and outcome.stage.embed_model == s.embedder.model_name
    scores = [p.score for p in outcome.passages]
    assert scores == sorted(scores, reverse=True)
    assert outcome.passages[0].id == "05-storage-and-lockers.md#lockers"


async def test_retrieve_hybrid_fuses_vector_and_text(corpus_services: Services) -> None:
    s, k = corpus_services, 5
    question = "When is the annual general meeting?"
    outcome = await retrieve(question, s.embedder, s.store, k, "hybrid", s.pipeline.corpora.model)
    _check_passages(outcome, k)
    assert outcome.stage.mode == "hybrid"

    # The order is the fused order of the two rankings the stage builds (pools of hybrid_pool(k) each), as the
    # Python reference fuses them (tests/store/test_hybrid_search.py holds it) ...
    query = s.embedder.embed_query(question)
    expected = await python_hybrid(s.store, query, question, k, hybrid_pool(k))
    assert [p.id for p in outcome.passages] == [p.id for p in expected]
    # ... and every score is the passage's cosine to the question, never a text rank.
    for p, want in zip(outcome.passages, expected, strict=True):
        assert p.score == pytest.approx(want.score, abs=1e-6)


async def test_retrieve_model_mismatch_is_409(corpus_services: Services) -> None:
    s = corpus_services
    with pytest.raises(ModelMismatch) as info:
        await retrieve("lockers", s.embedder, s.store, 4, "vector", "some-other/embedding-model")
    err = info.value
    assert isinstance(err, ServiceError)
    assert (err.status, err.code) == (409, "embedding_model_mismatch")
    assert "some-other/embedding-model" in err.message and s.embedder.model_name in err.message


@pytest.mark.parametrize("mode", ["vector", "hybrid"])
async def test_retrieve_empty_corpus(fresh_store: Store, embedder: Embedder, mode: str) -> None:
    outcome = await retrieve("How much is a locker?", embedder, fresh_store, 4, mode, None)
    assert outcome.passages == [] and outcome.stage.passages == []
    assert outcome.stage.status == "ok" and outcome.stage.detail == "the corpus is empty"
