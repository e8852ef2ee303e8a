"""What a corpus is, read from its own folder, so the page and other apps can say what they answer from.

Title and description come from an optional README.md at the folder's root, else from the documents'
top headings; example questions from an optional examples.json or examples.txt, else from the section
headings. A corpus has a name too: several live side by side, and /ask picks one by it.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Protocol

import msgspec
import numpy as np

from provenance import text as T
from provenance.embedder import Embedder
from provenance.errors import ConfigurationError, UnknownCorpus
from provenance.ports import Profile
from provenance.wire import CORPUS_NAME_PATTERN, CorpusExample

DEFAULT_CORPUS = "default"
README = "README.md"
# Questions, not facts: never ingested, or each example would retrieve itself.
EXAMPLE_FILES = ("examples.json", "examples.txt")
MAX_EXAMPLES = 6
MAX_DESCRIPTION_CHARS = 300
CORPUS_CHECK_EVERY_S = 5.0
# Enough passages to learn the vocabulary of any handbook-sized corpus without loading a huge one whole.
CORPUS_VOCABULARY_PASSAGES = 20_000
# The most stored word vectors read at start-up: the verifier's word cache holds 50,000.
STORED_WORDS_READ = 50_000
_NAME = re.compile(CORPUS_NAME_PATTERN)
_TITLE = re.compile(r"^#\s+(.+?)\s*#*\s*$")


class CorpusMeta(msgspec.Struct, frozen=True):
    title: str
    description: str
    examples: list[CorpusExample]


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

    async def resolve(self, name: str | None) -> str:
        """The corpus a question is for; an unknown name is the client's error (404), after one fresh look in
        case it was ingested since the last."""
        if name is None:
            return self.default
        if name not in self.known:
            await self.refresh()
            if name not in self.known:
                raise UnknownCorpus(name, sorted(self.known))
        return name


def valid_name(name: str) -> bool:
    return _NAME.match(name) is not None


def default_of(names: Collection[str]) -> str:
    """What /ask answers from without a `corpus`: "default" (what `make run` serves), else the first by name."""
    if DEFAULT_CORPUS in names or not names:
        return DEFAULT_CORPUS
    return min(names)


def describe(directory: Path, documents: Sequence[tuple[str, str]]) -> CorpusMeta:
    """The corpus's title, description and examples. `documents` are (file name, text) of what is ingested,
    in the order ingest reads them."""
    title, description = _readme(directory)
    titles = _document_titles(documents)
    if not title:
        title = titles[0] if len(titles) == 1 else directory.resolve().name
    if not description and titles:
        shown = titles[:8]
        more = f", and {len(titles) - len(shown)} more" if len(titles) > len(shown) else ""
        description = f"Covers {', '.join(shown)}{more}."
    examples = _examples_file(directory)
    if examples is None:
        examples = _derived_examples(documents)
    return CorpusMeta(title=title, description=_shorten(description), examples=examples[:MAX_EXAMPLES])


def _readme(directory: Path) -> tuple[str, str]:
    path = directory / README
    if not path.is_file():
        return "", ""
    try:
        lines = path.read_text(encoding="utf-8").lstrip("\ufeff").splitlines()
    except UnicodeDecodeError:
        return "", ""
    title = ""
    paragraph: list[str] = []
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("<!--"):
            continue
        match = _TITLE.match(stripped)
        if match and not title and not paragraph:
            title = match.group(1)
            continue
        if stripped.startswith("#"):
            if paragraph:
                break
            continue
        if stripped:
            paragraph.append(stripped)
        elif paragraph:
            break
    return title, " ".join(paragraph)


def _document_titles(documents: Sequence[tuple[str, str]]) -> list[str]:
    titles: list[str] = []
    for _, text in documents:
        for line in text.splitlines():
            match = _TITLE.match(line.strip())
            if match:
                if match.group(1) not in titles:
                    titles.append(match.group(1))
                break
    return titles


def _examples_file(directory: Path) -> list[CorpusExample] | None:
    for name in EXAMPLE_FILES:
        path = directory / name
        if not path.is_file():
            continue
        raw = path.read_bytes()
        if name.endswith(".json"):
            try:
                items = msgspec.json.decode(raw, type=list[str | CorpusExample])
            except msgspec.ValidationError as exc:
                raise ConfigurationError(
                    f"{path}: {exc}; it should be a list of questions, each a string or "
                    '{"question": "...", "covered": false}'
                ) from None
            except msgspec.DecodeError as exc:
                raise ConfigurationError(f"{path} is not valid JSON: {exc}") from None
            examples = [CorpusExample(question=i) if isinstance(i, str) else i for i in items]
        else:
            lines = raw.decode("utf-8", errors="replace").splitlines()
            examples = [CorpusExample(question=s) for s in (line.strip() for line in lines) if s and s[0] != "#"]
        examples = [e for e in examples if e.question.strip()]
        if not examples:
            raise ConfigurationError(f"{path} holds no questions")
        return examples
    return None


def _derived_examples(documents: Sequence[tuple[str, str]]) -> list[CorpusExample]:
    """One question per document, about its first `##` section, so every example is about something the
    corpus holds (whether the answer is specific enough is up to the pipeline, as for any question)."""
    examples: list[CorpusExample] = []
    for _, text in documents:
        for line in text.splitlines():
            stripped = line.strip()
            if stripped.startswith("## "):
                examples.append(CorpusExample(question=f"What do the documents say about {stripped[3:].strip()}?"))
                break
        if len(examples) == 3:
            break
    return examples


def _shorten(text: str) -> str:
    text = " ".join(text.split())
    if len(text) <= MAX_DESCRIPTION_CHARS:
        return text
    return text[: MAX_DESCRIPTION_CHARS - 1].rsplit(" ", 1)[0] + "…"
