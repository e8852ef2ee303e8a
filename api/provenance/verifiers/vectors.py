"""Sentence and word vectors for the local verifiers, cached: passages repeat across questions, so most
lookups are hits."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Sequence

import numpy as np

from provenance import text as T
from provenance.embedder import Embedder


class SentenceEmbeddings:
    """LRU cache of sentence vectors."""

    def __init__(self, embedder: Embedder, capacity: int = 20_000) -> None:
        self.embedder = embedder
        self.capacity = capacity
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, sentences: Sequence[str]) -> np.ndarray:
        with self._lock:
            missing = [s for s in dict.fromkeys(sentences) if s not in self._cache]
        if missing:
            vectors = self.embedder.embed_documents(missing)
            with self._lock:
                for s, v in zip(missing, vectors, strict=True):
                    self._cache[s] = v
                while len(self._cache) > self.capacity:
                    self._cache.popitem(last=False)
        with self._lock:
            for s in sentences:
                self._cache.move_to_end(s)
            return np.stack([self._cache[s] for s in sentences]) if sentences else np.zeros((0, 1))


def warm_sentences(cache: SentenceEmbeddings, passage_texts: Sequence[str], batch: int = 64) -> None:
    sentences = list(dict.fromkeys(s for text in passage_texts for s in T.split_sentences(text)))
    for start in range(0, min(len(sentences), cache.capacity), batch):
        cache.get(sentences[start : start + batch])


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
