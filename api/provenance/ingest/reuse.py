"""What a rebuild need not compute again: each document's parse and its passages, kept by the document's name
and content hash while a worker runs jobs back to back.

An upload's job rebuilds its corpus from every document the corpus holds (one staging area, one switch), so
without this each job read, parsed and chunked again every document earlier jobs had added, and found their
passages stored only after all that. The 18F handbook uploaded 20 files a job took 13 jobs, the later ones
spending most of their time on documents that had not changed (issue 45).

Bounded by the characters it holds, least recently used first out; a worker drops it when idle, as it drops
its embedder (`jobs.worker.Worker`).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

from cachetools import LRUCache

from provenance.ingest.chunking import Chunk
from provenance.ingest.documents.blocks import Block

# About 8 MB of text for each of the two caches: more than the 18F handbook (1.6 MB of Markdown) holds.
MAX_CHARS = 8_000_000

V = TypeVar("V")


class _Bounded(Generic[V]):
    """A least-recently-used map bounded by a size of each value, safe across the threads ingest reads in."""

    def __init__(self, size: Callable[[V], int], max_size: int) -> None:
        self._cache: LRUCache[Hashable, V] = LRUCache(maxsize=max_size, getsizeof=lambda v: max(1, size(v)))
        self._lock = threading.Lock()

    def get(self, key: Hashable) -> V | None:
        with self._lock:
            return self._cache.get(key)

    def put(self, key: Hashable, value: V) -> None:
        # One larger than the whole bound is not kept.
        with self._lock, contextlib.suppress(ValueError):
            self._cache[key] = value

    def __len__(self) -> int:
        with self._lock:
            return len(self._cache)


class Reuse:
    """A worker's parsed documents (blocks, keyed by name and content hash) and their passages (also keyed by
    what cuts them: the token limit and the model whose tokenizer counts)."""

    def __init__(self, max_chars: int = MAX_CHARS) -> None:
        self.parsed: _Bounded[tuple[str, list[Block]]] = _Bounded(
            lambda v: len(v[0]) + sum(len(b.text) for b in v[1]), max_chars
        )
        self.chunks: _Bounded[tuple[Chunk, ...]] = _Bounded(
            lambda v: sum(len(c.text) + len(c.heading) for c in v), max_chars
        )

    def __len__(self) -> int:
        """Documents it holds something of."""
        return max(len(self.parsed), len(self.chunks))
