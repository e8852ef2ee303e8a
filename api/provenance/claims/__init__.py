"""Deciding a claim: is it stated by the passages (support), and does it answer the question (relevance)?
One package, one word per idea:
- the rule checks (`claims.rules`: which passages count as support, premises; `claims.answer_types`: what
  kind of answer a question asks for and whether a claim gives it; and
  `claims.support.RuleSupport`, the question-free support check with its vetoes, a `ports.SupportCheck`);
- the local verifier `LOCAL_VERIFIER` names, over the rule checks: `features` (the default,
  `claims.features`) or `trained` (`claims.trained`), which differ in how they judge relevance, over the
  sentence and word vectors of `claims.vectors`;
- the model judge `JUDGE` names (`claims.judge`: the registry, the model and its calibration);
- whose verdict wins (`claims.verdict`): the judge on top of the local verifier, under the rules' final
  vetoes, and the claim's result from them and the generator's own verdicts.
A profile calls `build_verifier` and never chooses any of this itself.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence

import msgspec
import numpy as np

from provenance.claims.features import FeatureVerifier, build_feature_verifier, build_rule_support
from provenance.claims.judge import BuiltJudge, build_judge, independent_of_generator, judge_relation
from provenance.claims.vectors import SentenceEmbeddings, WordVectors
from provenance.claims.verdict import JudgedVerifier
from provenance.inference.embedder import Embedder
from provenance.ports import CorpusText, Verifier
from provenance.settings import LocalModels, Settings


class LocalVerifier(msgspec.Struct, frozen=True):
    """A built verifier and what a profile wires into itself with it."""

    # What judges every claim: the local verifier, or the reading judge on top of it.
    verifier: Verifier
    # Told the corpus's passages (text, stored sentence spans) whenever it is (re)loaded.
    on_corpus: Callable[[Sequence[CorpusText]], None]
    # Told the stored vectors of the retrieved passages' sentences (text, vector), read from the store.
    sentence_vectors: Callable[[Iterable[tuple[str, np.ndarray]]], None]
    # Told the stored word vectors (word, vector) when the corpora are (re)loaded, before `on_corpus`.
    word_vectors: Callable[[Iterable[tuple[str, np.ndarray]]], None]
    # What, beside the profile, changes answers: part of the answer cache's key.
    cache_tag: str
    # The sentence-vector cache the verifier fills, for a generator that wants the same vectors.
    sentences: SentenceEmbeddings
    # The local verifier alone, whatever judges: what the extractive generator checks its own parts with.
    local: Verifier
    # The reading judge, when JUDGE names one.
    judge: BuiltJudge | None = None


# A local verifier, what to tell it of the corpus, and its part of the cache key.
_Built = tuple[Verifier, Callable[[Sequence[CorpusText]], None], str]


def _features(embedder: Embedder, sentences: SentenceEmbeddings, words: WordVectors) -> _Built:
    features: FeatureVerifier = build_feature_verifier(embedder, sentences, words)
    return features, features.set_corpus, ""


def _trained(embedder: Embedder, sentences: SentenceEmbeddings, words: WordVectors) -> _Built:
    from provenance.claims.trained import build_trained_verifier

    trained = build_trained_verifier(build_rule_support(embedder, sentences, words=words))
    return trained, trained.set_corpus, "trained"


# LOCAL_VERIFIER's choices: each builds a verifier over the shared sentence and word vectors.
_LOCAL: dict[LocalModels, Callable[[Embedder, SentenceEmbeddings, WordVectors], _Built]] = {
    "features": _features,
    "trained": _trained,
}


def build_verifier(
    settings: Settings | LocalModels, embedder: Embedder, *, judge: BuiltJudge | None = None
) -> LocalVerifier:
    """The local verifier `LOCAL_VERIFIER` names, under the reading judge `JUDGE` names (built here unless
    given). A bare `LocalModels` name builds the local verifier alone (no judge), for tools that want only it."""
    if isinstance(settings, str):
        models, resolved = settings, None
    else:
        models, resolved = settings.local_verifier, settings
    sentences, words = SentenceEmbeddings(embedder), WordVectors(embedder)
    local, on_corpus, tag = _LOCAL[models](embedder, sentences, words)
    if resolved is not None and judge is None:
        judge = build_judge(resolved)
    verifier: Verifier = local
    if judge is not None:
        assert resolved is not None
        verifier = JudgedVerifier(
            local,
            judge.judge,
            independent=independent_of_generator(resolved, judge.judge.model),
            relation=judge_relation(resolved, judge.judge.model),
            relevance=resolved.judge.relevance,
        )
        tag = "|".join(t for t in (tag, judge.judge.tag, f"relevance:{resolved.judge.relevance}") if t)
    return LocalVerifier(
        verifier=verifier,
        on_corpus=on_corpus,
        sentence_vectors=sentences.put,
        word_vectors=words.cache.put,
        cache_tag=tag,
        sentences=sentences,
        local=local,
        judge=judge,
    )
