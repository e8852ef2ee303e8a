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


@pytest.mark.skipif(sys.platform != "linux", reason="a thread's own nice value is Linux's")
def test_the_model_runs_on_a_thread_of_its_own_below_the_callers_with_the_same_vectors(embedder: Embedder) -> None:
    inner = getattr(embedder, "inner", embedder)
    seen: list[tuple[int, int]] = []

    class Watched:
        model_name, dim = inner.model_name, inner.dim

        def embed_documents(self, texts: list[str]) -> np.ndarray:
            seen.append((threading.get_native_id(), nice_here()))
            return inner.embed_documents(texts)

        def embed_query(self, text: str) -> np.ndarray:
            seen.append((threading.get_native_id(), nice_here()))
            return inner.embed_query(text)

        def count_tokens(self, text: str) -> int:
            return inner.count_tokens(text)

    before = nice_here()
    low = LowPriorityEmbedder(Watched(), 7)
    texts = ["The shed opens at nine.", "Plots cost $40 a year."]
    np.testing.assert_array_equal(low.embed_documents(texts), inner.embed_documents(texts))
    np.testing.assert_array_equal(low.embed_query("When does it open?"), inner.embed_query("When does it open?"))
    assert low.count_tokens("The shed opens at nine.") == inner.count_tokens("The shed opens at nine.")
    [(tid, nice), (tid_again, _)] = seen
    assert tid == tid_again != threading.get_native_id()
    assert nice == min(19, before + 7) and nice_here() == before
