"""The embedder's micro-batcher and memo: concurrent queries share one model call, with the same vectors."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

from provenance.inference.embedder import BatchingEmbedder, Embedder, embed_query_async, one_request
from provenance.ingest.folder import ingest
from provenance.pipeline.door import Pipeline
from provenance.profiles.local import build_local_profile
from provenance.settings import REPO_ROOT, Settings

QUESTIONS = [
    "How much does a standard locker cost per month?",
    "Who do I email to book laser cutter training?",
    "What happens to unlabelled things left on the shelf?",
    "Can I bring a guest on a weekday evening?",
    "Is there a student discount?",
    "When is the workshop open on Sundays?",
]


class Counting:
    """The real embedder, counting the model calls made through it."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.model_name = inner.model_name
        self.dim = inner.dim
        self.calls: list[int] = []  # texts per call
        self.queries: list[str] = []  # every text embedded, by either method

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        self.calls.append(len(texts))
        self.queries.extend(texts)
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> np.ndarray:
        self.calls.append(1)
        self.queries.append(text)
        return self.inner.embed_query(text)

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)


@pytest.fixture(scope="module")
def single(embedder: Embedder) -> list[np.ndarray]:
    return [embedder.embed_query(q) for q in QUESTIONS]


async def test_concurrent_queries_run_as_one_batch_with_the_single_vectors(
    embedder: Embedder, single: list[np.ndarray]
) -> None:
    counting = Counting(embedder)
    batching = BatchingEmbedder(counting, wait_s=0.01)
    vectors = await asyncio.gather(*(embed_query_async(batching, q) for q in QUESTIONS))
    assert counting.calls == [len(QUESTIONS)]
    for got, want in zip(vectors, single, strict=True):
        assert got.shape == want.shape
        assert np.allclose(got, want, atol=1e-5)


async def test_a_text_embedded_once_per_request_however_many_stages_ask(embedder: Embedder) -> None:
    counting = Counting(embedder)
    batching = BatchingEmbedder(counting, wait_s=0.0)
    with one_request():
        first = await embed_query_async(batching, QUESTIONS[0])
        # Screening, retrieval, the generator and the verifier each ask for the question's vector; the
        # verifier from a worker thread, which sees the request's memo through the copied context.
        again = [
            await embed_query_async(batching, QUESTIONS[0]),
            batching.embed_query(QUESTIONS[0]),
            await asyncio.to_thread(batching.embed_query, QUESTIONS[0]),
        ]
    assert counting.calls == [1]
    assert all(v is first for v in again)
    assert not first.flags.writeable  # shared, so nobody may change it in place


async def test_requests_do_not_share_what_they_embedded(embedder: Embedder) -> None:
    counting = Counting(embedder)
    batching = BatchingEmbedder(counting, wait_s=0.0)

    async def request() -> np.ndarray:
        with one_request():
            return await embed_query_async(batching, QUESTIONS[0])

    await asyncio.gather(request(), request())
    await request()
    batching.embed_query(QUESTIONS[0])  # outside any request: no memo at all
    batching.embed_query(QUESTIONS[0])
    assert sum(counting.calls) == 5


async def test_one_pipeline_request_embeds_its_question_once(embedder: Embedder, fresh_store: Any) -> None:
    """The real local pipeline: screening, retrieval, the generator and the verifier all read the question's
    vector, and the model is asked for it once."""
    counting = Counting(embedder)
    batching = BatchingEmbedder(counting, wait_s=0.0)
    await ingest(fresh_store, REPO_ROOT / "corpus", lambda: batching, batching.model_name)
    pipeline = Pipeline(Settings(), fresh_store, batching, build_local_profile(batching))
    await pipeline.corpora.refresh()
    question = "How much does a standard locker cost per month?"
    counting.queries.clear()
    outcome = await pipeline.ask(question, request_id="memo", use_cache=False)
    assert outcome.response.status == "answered"
    # Whatever else was embedded (claims, passage sentences), the question itself once.
    assert counting.queries.count(question) == 1


async def test_a_failing_model_call_fails_every_caller_in_its_batch(embedder: Embedder) -> None:
    class Broken(Counting):
        def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
            raise RuntimeError("onnxruntime failed")

    batching = BatchingEmbedder(Broken(embedder), wait_s=0.01)
    results = await asyncio.gather(*(batching.aembed_query(q) for q in QUESTIONS[:3]), return_exceptions=True)
    assert all(isinstance(r, RuntimeError) for r in results)
    # Nothing failed is remembered: the next call tries the model again.
    with one_request(), pytest.raises(RuntimeError):
        await batching.aembed_query(QUESTIONS[0])
