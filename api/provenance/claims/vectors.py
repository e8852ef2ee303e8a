"""Sentence and word vectors for the local verifiers, cached: passages repeat across questions, so most
lookups are hits."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence

import numpy as np

from provenance import text as T
from provenance.inference.embedder import Embedder


def sentence_key(text: str) -> str:
    """A sentence as the cache knows it: runs of whitespace as one space. A sentence read from a passage
    (`T.sentence_ranges`, line breaks joined) and its span cut from the passage's text (`text[start:end]`,
    as ingest stores it) are one key, and one vector: the embedder's tokenizer splits on any whitespace."""
    return " ".join(text.split())


class SentenceEmbeddings:
    """LRU cache of sentence vectors. Filled from the store (the vectors ingest computed for each retrieved
    passage's sentences, `put`), so that only what no passage holds (a generated answer's own wording) is
    embedded on the request path."""

    def __init__(self, embedder: Embedder, capacity: int = 20_000) -> None:
        self.embedder = embedder
        self.capacity = capacity
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()
        # Texts embedded here, on the request path, rather than read from the store: what a benchmark and
        # the tests count.
        self.embedded = 0

    def put(self, items: Iterable[tuple[str, np.ndarray]]) -> None:
        with self._lock:
            for text, vector in items:
                key = sentence_key(text)
                self._cache[key] = vector
                self._cache.move_to_end(key)
            self._trim()

    def _trim(self) -> None:
        while len(self._cache) > self.capacity:
            self._cache.popitem(last=False)

    def get(self, sentences: Sequence[str]) -> np.ndarray:
        keys = [sentence_key(s) for s in sentences]
        with self._lock:
            missing = [k for k in dict.fromkeys(keys) if k not in self._cache]
        if missing:
            vectors = self.embedder.embed_documents(missing)
            with self._lock:
                self.embedded += len(missing)
                for k, v in zip(missing, vectors, strict=True):
                    self._cache[k] = v
                self._trim()
        with self._lock:
            out = []
            for k in keys:
                # Evicted meanwhile by a concurrent request's fill: embed it again rather than fail.
                vector = self._cache.get(k)
                if vector is None:
                    vector = self.embedder.embed_documents([k])[0]
                    self.embedded += 1
                self._cache[k] = vector
                self._cache.move_to_end(k)
                out.append(vector)
            return np.stack(out) if out else np.zeros((0, 1))


class WordVectors:
    """Vectors of single words, for soft term matching ("age" answers "how old")."""

    def __init__(self, embedder: Embedder, capacity: int = 50_000) -> None:
        self.cache = SentenceEmbeddings(embedder, capacity)

    def similarity(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        if not a or not b:
            return np.zeros((len(a), len(b)))
        va, vb = self.cache.get(list(a)), self.cache.get(list(b))
        return np.asarray(va @ vb.T)


# Word-vector similarity below this is a mere neighbour ("acrylic"/"plywood" 0.40, "parking"/"bike" 0.45)...
SOFT_MATCH_FLOOR = 0.45
# ...and from this one up a near-synonym ("fee"/"cost" 0.71, "old"/"age" 0.69) counts in full.
SOFT_MATCH_FULL = 0.75


def soft_match(similarity: float) -> float:
    """Word-vector similarity to coverage, 0 to 1."""
    return min(1.0, max(0.0, (similarity - SOFT_MATCH_FLOOR) / (SOFT_MATCH_FULL - SOFT_MATCH_FLOOR)))


def vocabulary_words(text: str) -> set[str]:
    """Every surface form `surface_terms` may give for text or any part of it: the words whose vectors
    ingest stores, so the verifier reads them rather than embeds them."""
    return {
        w for w in T.words(text) if w not in T.STOPWORDS and w not in T.QUESTION_WORDS and (len(w) >= 2 or w.isdigit())
    }


def surface_terms(text: str, question: bool = False) -> dict[str, str]:
    """stem -> a surface form of it, for the content words of text (numbers included)."""
    out: dict[str, str] = {}
    for w in T.words(text):
        if w in T.STOPWORDS or w in T.QUESTION_WORDS or (len(w) < 2 and not w.isdigit()):
            continue
        if question and w in T.QUESTION_FILLER:
            continue
        out.setdefault(T.stem(w), w)
    return out


_WEEKEND = frozenset(T.stem(d) for d in ("saturday", "saturdays", "sunday", "sundays"))
_WEEKDAY = frozenset(T.stem(d) for d in T.DAYS[:5]) | frozenset(T.stem(f"{d}s") for d in T.DAYS[:5])
_WEEKEND_STEM, _WEEKDAY_STEM = T.stem("weekend"), T.stem("weekday")


def with_calendar(covering: dict[str, str]) -> dict[str, str]:
    """`covering` (stem -> word) with "weekend" when it names Saturday or Sunday and "weekday" when it names a
    day from Monday to Friday: for relevance, a sentence about Saturday speaks to a question about weekends.
    Never for support: "open at weekends" is more than a sentence about Saturday says."""
    added = {
        stem_: word
        for stem_, word, days in ((_WEEKEND_STEM, "weekend", _WEEKEND), (_WEEKDAY_STEM, "weekday", _WEEKDAY))
        if stem_ not in covering and any(day in covering for day in days)
    }
    # Unchanged, not copied, when there is nothing to add: `covering` may be the corpus's whole vocabulary.
    return covering | added if added else covering
