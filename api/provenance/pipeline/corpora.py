"""The corpora the pipeline knows: their names, embedding model, version and vocabulary, looked
at again every few seconds, so /ask picks one by name and an unknown name is a 404."""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Sequence
from typing import Protocol

import msgspec
import numpy as np

from provenance import text as T
from provenance.access.clients import Client, require_read
from provenance.errors import UnknownCorpus
from provenance.inference.embedder import Embedder
from provenance.ports import Profile
from provenance.wire import default_of

CORPUS_CHECK_EVERY_S = 5.0
# Enough passages to learn the vocabulary of any handbook-sized corpus without loading a huge one whole.
CORPUS_VOCABULARY_PASSAGES = 20_000
# The most stored word vectors read at start-up: the verifier's word cache holds 50,000.
STORED_WORDS_READ = 50_000


class KnownCorpus(msgspec.Struct, frozen=True):
    """What the pipeline remembers of a corpus between looks at the database."""

    embedding_model: str | None
    version: str | None
    # Its passages: retrieval reads a small corpus exactly rather than through the HNSW index over them all.
    passage_count: int = 0


# A corpus the pipeline has not seen: no model to check the embedder against, no version for cache keys.
UNKNOWN_CORPUS = KnownCorpus(embedding_model=None, version=None)


class _Ingested(Protocol):
    """A corpus as the store records it (`store.CorpusState`)."""

    @property
    def name(self) -> str: ...

    @property
    def embedding_model(self) -> str: ...

    @property
    def version(self) -> str: ...

    @property
    def passage_count(self) -> int: ...


class CorpusLooks(Protocol):
    """What the registry reads of the store (`store.CorpusStore`)."""

    async def corpora(self) -> Sequence[_Ingested]: ...

    async def corpus_versions(self) -> dict[str, str]: ...

    async def word_vectors(self, model: str, limit: int) -> list[tuple[str, np.ndarray]]: ...

    async def passage_texts(self, limit: int, segmenter: str) -> list[tuple[str, list[tuple[int, int]]]]: ...


class CorpusRegistry:
    """The corpora a pipeline answers from, as of its last look at the database: each one's embedding model
    (what the embedder is checked against) and version (part of every cache key). The profile learns their
    vocabulary whenever they change."""

    def __init__(self, store: CorpusLooks, embedder: Embedder, profile: Profile) -> None:
        self._store = store
        self._embedder = embedder
        self._profile = profile
        # corpus name -> its embedding model and version, as of the last look at the database
        self.known: dict[str, KnownCorpus] = {}
        self.check_every_s = CORPUS_CHECK_EVERY_S
        self._checked = time.monotonic()
        # The corpora's versions when the profile last learnt their vocabulary.
        self._vocabulary_of: dict[str, str] | None = None

    def copy(self) -> CorpusRegistry:
        """A registry that knows what this one knows, and whose profile has learnt the same vocabulary; the
        two look at the database apart from then on."""
        other = CorpusRegistry(self._store, self._embedder, self._profile)
        other.known = dict(self.known)
        other.check_every_s = self.check_every_s
        other._checked = self._checked
        other._vocabulary_of = self._vocabulary_of
        return other

    async def notice_new(self) -> None:
        """A `provenance ingest` run elsewhere changes the corpus under a running server: look (one small
        query, at most every few seconds) and pick up the new version, so cache keys and the verifier's
        vocabulary follow it without a restart."""
        now = time.monotonic()
        if now - self._checked < self.check_every_s:
            return
        self._checked = now
        if await self._store.corpus_versions() != {name: c.version for name, c in self.known.items()}:
            await self.refresh()

    def look_soon(self) -> None:
        """A job of this process switched a corpus: the next question looks at the versions (one small query)
        instead of waiting out `check_every_s`."""
        self._checked = -math.inf

    async def refresh(self) -> None:
        self._checked = time.monotonic()
        corpora = await self._store.corpora()
        versions = {c.name: c.version for c in corpora}
        # The profile learns the corpora's vocabulary only when they changed, not on every fresh look (a
        # question naming a corpus that doesn't exist takes one).
        if versions != self._vocabulary_of:
            if self._profile.word_vectors is not None:
                # Stored at ingest: the vocabulary's vectors are read, not embedded again at every start.
                words = await self._store.word_vectors(self._embedder.model_name, STORED_WORDS_READ)
                self._profile.word_vectors(words)
            if self._profile.on_corpus is not None:
                texts = await self._store.passage_texts(CORPUS_VOCABULARY_PASSAGES, T.SEGMENTER_VERSION)
                await asyncio.to_thread(self._profile.on_corpus, texts)
            self._vocabulary_of = versions
        self.known = {c.name: KnownCorpus(c.embedding_model, c.version, c.passage_count) for c in corpora}

    def of(self, name: str) -> KnownCorpus:
        return self.known.get(name, UNKNOWN_CORPUS)

    @property
    def default(self) -> str:
        return default_of(self.known)

    @property
    def model(self) -> str | None:
        """The default corpus's embedding model."""
        return self.of(self.default).embedding_model

    @property
    def version(self) -> str | None:
        """The default corpus's version."""
        return self.of(self.default).version

    async def resolve(self, name: str | None, client: Client) -> str:
        """The corpus a question is for. An unknown name, or one this client may not read, is the same
        client's error (404, naming only what it can see), after one fresh look in case it was ingested
        since the last. Without a name, the default: never a private corpus, whoever asks."""
        if name is None:
            default = default_of(self.known, client.private)
            if default in client.private:
                raise UnknownCorpus(default, client.visible(self.known))
            return default
        if name not in self.known:
            await self.refresh()
        require_read(client, name, self.known)
        return name
