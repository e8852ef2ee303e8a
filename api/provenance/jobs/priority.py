"""Ingest below the API on the CPU: on the cores it shares with `/ask`, a job takes what questions leave
(issue 45: with the job at the API's priority, uncached `/ask` p50 was 2.39x idle while it ran).

Linux gives each thread its own nice value, so an in-server worker lowers only the one thread its embedder runs
on, and the API's threads keep theirs; `provenance worker`, a process that only ingests, lowers itself whole.
"""

from __future__ import annotations

import os
import sys
import threading
import weakref
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from provenance.inference.embedder import Embedder
from provenance.logs import get_logger

log = get_logger("provenance.jobs.priority")


def lower_process(nice: int) -> None:
    """This process, every thread it has and will have, `nice` lower (`provenance worker`)."""
    if nice > 0:
        os.nice(nice)


def _lower_this_thread(nice: int) -> None:
    if nice <= 0:
        return
    if sys.platform != "linux":
        # Elsewhere the call would lower the whole process, the API's threads with it.
        log.warning("INGEST_NICE applies to an in-server worker on Linux only; its embedder runs at the API's")
        return
    tid = threading.get_native_id()
    os.setpriority(os.PRIO_PROCESS, tid, min(19, os.getpriority(os.PRIO_PROCESS, tid) + nice))


class LowPriorityEmbedder:
    """An ingest embedder whose model runs on one thread of its own, `nice` below the threads that created it:
    the scheduler gives the cores to the API's threads first, and to this one what they leave. The thread runs
    the model's calls (onnxruntime holds no GIL while it computes); tokens are counted where they are asked."""

    def __init__(self, inner: Embedder, nice: int) -> None:
        self.inner = inner
        self.model_name = inner.model_name
        self.dim = inner.dim
        # A thread's nice value can be raised but not lowered again without privileges: the thread is this
        # embedder's alone, never one of the event loop's executor threads that the API also uses.
        self._thread = ThreadPoolExecutor(
            max_workers=1, thread_name_prefix="ingest-embed", initializer=_lower_this_thread, initargs=(nice,)
        )
        # The worker drops an idle embedder (jobs.worker.WarmEmbedder): its thread goes with it.
        weakref.finalize(self, self._thread.shutdown, wait=False)

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        return self._thread.submit(self.inner.embed_documents, texts).result()

    def embed_query(self, text: str) -> np.ndarray:
        return self._thread.submit(self.inner.embed_query, text).result()

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)
