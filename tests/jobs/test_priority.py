"""An in-server worker's embedder runs below the API on the CPU (issue 45): the model's calls on one thread of its
own whose nice value is INGEST_NICE higher, the caller's threads left as they were, and the same vectors."""

from __future__ import annotations

import os
import sys
import threading

import numpy as np
import pytest

from provenance.inference.embedder import Embedder
from provenance.jobs.priority import LowPriorityEmbedder


def nice_here() -> int:
    return os.getpriority(os.PRIO_PROCESS, threading.get_native_id())


class Watched:
    """The session's embedder, noting the thread (and its nice value) each model call runs on."""

    def __init__(self, inner: Embedder, seen: list[tuple[int, int]]) -> None:
        self.inner, self.seen = inner, seen
        self.model_name, self.dim = inner.model_name, inner.dim

    def embed_documents(self, texts: list[str]) -> np.ndarray:
        self.seen.append((threading.get_native_id(), nice_here()))
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> np.ndarray:
        self.seen.append((threading.get_native_id(), nice_here()))
        return self.inner.embed_query(text)

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)


@pytest.mark.skipif(sys.platform != "linux", reason="a thread's own nice value is Linux's")
def test_the_model_runs_on_a_thread_of_its_own_below_the_callers_with_the_same_vectors(embedder: Embedder) -> None:
    inner = getattr(embedder, "inner", embedder)
    seen: list[tuple[int, int]] = []
    loaded_on: list[tuple[int, int]] = []

    def load() -> Watched:
        loaded_on.append((threading.get_native_id(), nice_here()))
        return Watched(inner, seen)

    before = nice_here()
    low = LowPriorityEmbedder(load, 7)
    texts = ["The shed opens at nine.", "Plots cost $40 a year."]
    np.testing.assert_array_equal(low.embed_documents(texts), inner.embed_documents(texts))
    np.testing.assert_array_equal(low.embed_query("When does it open?"), inner.embed_query("When does it open?"))
    assert low.count_tokens("The shed opens at nine.") == inner.count_tokens("The shed opens at nine.")
    [(tid, nice), (tid_again, _)] = seen
    assert tid == tid_again != threading.get_native_id()
    assert nice == min(19, before + 7) and nice_here() == before
    # Loaded where it runs: threads a model's runtime makes as it loads inherit the lowered priority.
    assert loaded_on == [(tid, nice)]


@pytest.mark.skipif(sys.platform != "linux", reason="a thread's own nice value is Linux's")
def test_with_two_threads_a_batch_is_cut_between_two_models_each_on_its_own_lowered_thread(embedder: Embedder) -> None:
    inner = getattr(embedder, "inner", embedder)
    seen: list[tuple[int, int]] = []
    loaded_on: list[tuple[int, int]] = []

    def load() -> Watched:
        loaded_on.append((threading.get_native_id(), nice_here()))
        return Watched(inner, seen)

    before = nice_here()
    low = LowPriorityEmbedder(load, 5, threads=2)
    texts = [f"Plot {i} costs ${10 * i} a year and opens at {i} o'clock." for i in range(5)]
    vectors = low.embed_documents(texts)
    # The same vectors, in the batch's order, from both models.
    assert vectors.shape == (5, inner.dim)
    np.testing.assert_allclose(vectors, inner.embed_documents(texts), atol=1e-6)
    assert len(seen) == 2 and len({tid for tid, _ in seen}) == 2
    assert threading.get_native_id() not in {tid for tid, _ in seen}
    assert {nice for _, nice in seen} == {min(19, before + 5)} and nice_here() == before
    assert sorted(loaded_on) == sorted(seen)
    # One text is not cut.
    np.testing.assert_allclose(low.embed_documents(texts[:1]), inner.embed_documents(texts[:1]), atol=1e-6)
    assert len(seen) == 3
