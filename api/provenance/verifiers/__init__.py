"""The local verifiers, behind one builder.

Every profile scores every claim on this machine with the verifier `LOCAL_MODELS` names: `features` (the
default, `verifiers.features`) or `trained` (`verifiers.trained`). Both judge support with the same
question-free check (`verifiers.support`) and differ in how they judge relevance. The rules they share (which
passages count as support, answer types, premises) are `verifiers.rules`. A profile calls `build_verifier`
and never chooses between them itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import msgspec
import numpy as np

from provenance.embedder import Embedder
from provenance.ports import Verifier
from provenance.settings import LocalModels
from provenance.verifiers.features import FeatureVerifier, build_feature_verifier, build_support_judge
from provenance.verifiers.vectors import SentenceEmbeddings, WordVectors


class LocalVerifier(msgspec.Struct, frozen=True):
    """A built verifier and what a profile wires into itself with it."""

    verifier: Verifier
    # Told the corpus's passage texts whenever it is (re)loaded.
    on_corpus: Callable[[Sequence[str]], None]
    # Told the stored vectors of the retrieved passages' sentences (text, vector), read from the store.
    sentence_vectors: Callable[[Iterable[tuple[str, np.ndarray]]], None]
    # Told the stored word vectors (word, vector) when the corpora are (re)loaded, before `on_corpus`.
    word_vectors: Callable[[Iterable[tuple[str, np.ndarray]]], None]
    # What, beside the profile, changes answers: part of the answer cache's key.
    cache_tag: str
    # The sentence-vector cache the verifier fills, for a generator that wants the same vectors.
    sentences: SentenceEmbeddings


def build_verifier(models: LocalModels, embedder: Embedder) -> LocalVerifier:
    sentences, words = SentenceEmbeddings(embedder), WordVectors(embedder)
    verifier: FeatureVerifier | Verifier
    if models == "trained":
        from provenance.verifiers.trained import build_trained_verifier

        trained = build_trained_verifier(build_support_judge(embedder, sentences, words=words))
        verifier, on_corpus, tag = trained, trained.set_corpus, "trained"
    else:
        features = build_feature_verifier(embedder, sentences, words)
        verifier, on_corpus, tag = features, features.set_corpus, ""
    return LocalVerifier(
        verifier=verifier,
        on_corpus=on_corpus,
        sentence_vectors=sentences.put,
        word_vectors=words.cache.put,
        cache_tag=tag,
        sentences=sentences,
    )
