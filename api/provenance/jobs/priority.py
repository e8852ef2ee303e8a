"""Ingest below the API on the CPU: on the cores it shares with `/ask`, a job takes what questions leave
(issue 45: with the job at the API's priority, uncached `/ask` p50 was 2.39x idle while it ran).

Linux gives each thread its own nice value, so an in-server worker lowers only the threads its embedder runs on
(one a core by default, INGEST_THREADS), and the API's threads keep theirs; `provenance worker`, a process that
only ingests, lowers itself whole.
"""

from __future__ import annotations

import os
import sys
import threading
import weakref
from collections.abc import Callable, Sequence
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
    """An ingest embedder whose model runs on threads of its own, `nice` below the threads that created it: the
    scheduler gives the cores to the API's threads first, and to these what they leave.

    With `threads` above 1 it holds that many models, each made and run on its own thread (onnxruntime holds
    no GIL while it computes), and a batch is cut into that many parts embedded at once: so the job has every
    core the questions leave, and nothing of it runs at the API's priority. One model with onnxruntime's own
    threads would not do that: its pool threads are made by the thread that loads it, with that thread's nice
    value. Tokens are counted where they are asked, by the first model."""

    def __init__(self, load: Callable[[], Embedder], nice: int, threads: int = 1) -> None:
        # A thread's nice value can be raised but not lowered again without privileges: each thread is this
        # embedder's alone, never one of the event loop's executor threads that the API also uses.
        self._threads = [
            ThreadPoolExecutor(
                max_workers=1, thread_name_prefix="ingest-embed", initializer=_lower_this_thread, initargs=(nice,)
            )
            for _ in range(max(1, threads))
        ]
        # The worker drops an idle embedder (jobs.worker.WarmEmbedder): its threads go with it.
        for thread in self._threads:
            weakref.finalize(self, thread.shutdown, wait=False)
        # Loaded at once, each on the thread that will run it.
        self._models = [f.result() for f in [t.submit(load) for t in self._threads]]
        self.inner = self._models[0]
        self.model_name = self.inner.model_name
        self.dim = self.inner.dim

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        parts = min(len(self._models), len(texts))
        if parts <= 1:
            return self._threads[0].submit(self.inner.embed_documents, texts).result()
        # Contiguous parts of the batch (the caller sorted it by length), one a model, in their order.
        cuts = [round(i * len(texts) / parts) for i in range(parts + 1)]
        running = [
            thread.submit(model.embed_documents, texts[a:b])
            for thread, model, a, b in zip(self._threads, self._models, cuts, cuts[1:], strict=False)
        ]
        return np.concatenate([f.result() for f in running])

    def embed_query(self, text: str) -> np.ndarray:
        return self._threads[0].submit(self.inner.embed_query, text).result()

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)
