"""The feature verifier (`LOCAL_VERIFIER=features`, the default): two judgments per claim, kept apart.

- Support, without the question: `claims.support`.
- Relevance, whether the claim answers the question: a calibrated logistic model over hand-built features of
  (question, claim, passage): how much of the question the claim, the passage and the corpus cover, the
  claim's embedding similarity to the question, whether it is the kind of answer asked for, and whether the
  question's numbers are there. Word coverage can't read, so this verifier is the weak one: in a model profile
  the model's own verdict replaces it.

Coefficients come from `evals/calibrate_verifier.py` (relevance) and `evals/calibrate_support.py`
(support), not from the generator's scoring; the extractive generator shares only the embedder and the
sentence-vector cache.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path

import msgspec
import numpy as np

from provenance import text as T
from provenance.claims.answer_types import answer_type_match, expected_answer_type
from provenance.claims.relevance import QuotedClaim, quoted_answer
from provenance.claims.rules import LogisticModel, supporting
from provenance.claims.support import RuleSupport
from provenance.claims.vectors import SentenceEmbeddings, WordVectors, soft_match, surface_terms, with_calendar
from provenance.inference.embedder import Embedder
from provenance.ports import (
    MISSING_VERDICT,
    ClaimVerdict,
    CorpusText,
    PassageSupport,
    ScoredPassage,
    SentenceScore,
    SupportCheck,
    Verification,
)
from provenance.wire import EvidenceSpan

COEFFICIENTS_PATH = Path(__file__).resolve().parent.parent / "data" / "local_verifier.json"
FEATURE_VERIFIER = "local-calibrated-verifier"


class RelevanceFeatures(msgspec.Struct, frozen=True):
    """Whether a claim, read against its passage, answers the question; each within [0, 1]."""

    # The best sub-question's mean coverage by the claim and its section heading.
    question_coverage: float
    # ... by the whole passage: question terms it lacks are what a gap or a swapped entity looks like.
    question_passage_coverage: float
    question_claim_sim: float
    answer_type_match: float
    question_numbers_supported: float
    # The weakest question term's coverage by the corpus's vocabulary: a question about something the corpus
    # never mentions (a dog, car parking) can't be answered from it, however close a passage looks.
    question_corpus_coverage: float


RELEVANCE_FEATURES = tuple(RelevanceFeatures.__struct_fields__)
SUPPORT_FEATURES = ("coverage", "added", "similarity")


class Coefficients(msgspec.Struct, frozen=True):
    support: LogisticModel
    relevance: LogisticModel
    # Where each model's coefficients come from.
    source: str = ""
    support_source: str = ""


def load_coefficients(path: Path = COEFFICIENTS_PATH) -> Coefficients:
    coef = msgspec.json.decode(path.read_bytes(), type=Coefficients)
    if tuple(coef.support.features) != SUPPORT_FEATURES or tuple(coef.relevance.features) != RELEVANCE_FEATURES:
        raise ValueError(f"{path} was fitted on other features than the verifier computes")
    return coef


class RelevanceExtractor:
    """Computes `RelevanceFeatures` for (question, claim, passage)."""

    def __init__(self, sentences: SentenceEmbeddings, words: WordVectors) -> None:
        self.sentences = sentences
        self.words = words
        self.vocabulary: dict[str, str] = {}

    def set_corpus(self, passages: Sequence[CorpusText]) -> None:
        """Learn the words the whole corpus uses."""
        vocabulary: dict[str, str] = {}
        for text, _ in passages:
            for stem_, word in surface_terms(text).items():
                vocabulary.setdefault(stem_, word)
        words = list(vocabulary.values())
        for start in range(0, len(words), 256):
            self.words.cache.get(words[start : start + 256])
        self.vocabulary = vocabulary

    def _soft_coverage(self, question: str, covering: dict[str, str]) -> tuple[float, float]:
        """(mean, min) over the question's terms of how well `covering` contains each; the best sub-question."""
        best = (1.0, 1.0)
        best_key = -1.0
        covering = with_calendar(covering)
        for part in T.sub_questions(question):
            q_terms = surface_terms(part, question=True)
            if not q_terms:
                continue
            missing = [w for stem_, w in q_terms.items() if stem_ not in covering]
            scores = {stem_: 1.0 for stem_ in q_terms if stem_ in covering}
            if missing:
                sims = self.words.similarity(missing, list(covering.values()))
                for w, row in zip(missing, sims, strict=True):
                    scores[T.stem(w)] = soft_match(float(row.max())) if row.size else 0.0
            values = list(scores.values())
            mean, low = sum(values) / len(values), min(values)
            if mean + low > best_key:
                best_key, best = mean + low, (mean, low)
        return best

    def features(
        self, question: str, claim: str, claim_vec: np.ndarray, question_vec: np.ndarray, passage: ScoredPassage
    ) -> RelevanceFeatures:
        section = T.section_path(passage.heading)
        q_mean, _ = self._soft_coverage(question, surface_terms(claim) | surface_terms(section))
        # The mean, not the minimum: members phrase questions in words a handbook doesn't use ("sign up",
        # "hourly charge"), and one such word must not sink a claim the other features support.
        q_passage, _ = self._soft_coverage(question, surface_terms(passage.text) | surface_terms(section))
        _, q_corpus = self._soft_coverage(question, self.vocabulary | surface_terms(passage.text + " " + section))
        return RelevanceFeatures(
            question_coverage=q_mean,
            question_passage_coverage=q_passage,
            question_claim_sim=max(0.0, float(claim_vec @ question_vec)),
            answer_type_match=answer_type_match(expected_answer_type(question), claim),
            question_numbers_supported=(
                1.0 if T.bare_numbers(question) <= T.bare_numbers(passage.text + " " + claim) else 0.0
            ),
            question_corpus_coverage=q_corpus,
        )


class FeatureVerifier:
    name = FEATURE_VERIFIER

    def __init__(
        self, support: SupportCheck, relevance: RelevanceExtractor, coefficients: Coefficients | None = None
    ) -> None:
        self.support = support
        self.relevance = relevance
        self.coef = coefficients or load_coefficients()

    def set_corpus(self, passages: Sequence[CorpusText]) -> None:
        self.support.set_corpus(passages)
        self.relevance.set_corpus(passages)

    def relevance_of(
        self, question: str, claim: str, claim_vec: np.ndarray, question_vec: np.ndarray, passage: ScoredPassage
    ) -> float:
        return self.coef.relevance.probability(
            self.relevance.features(question, claim, claim_vec, question_vec, passage)
        )

    def claim_relevance(
        self,
        question: str,
        claim: str,
        claim_vec: np.ndarray,
        question_vec: np.ndarray,
        passages: Sequence[ScoredPassage],
        quoted: bool,
    ) -> float:
        """Whether the claim answers the question, read against the passages that state it: the best of them.
        A claim quoted word for word that the quoted-answer rule confirms in that passage is confirmed to
        answer (`claims.relevance`): its support is certain, and the coverage model reads a member's own word
        or a misspelling as a question term the sentence lacks."""
        read = [(self.relevance.features(question, claim, claim_vec, question_vec, p), p) for p in passages]
        scored = [(self.coef.relevance.probability(f), f, p) for f, p in read]
        relevance, features, passage = max(scored, key=lambda s: s[0])
        if quoted:
            confirmed = quoted_answer(
                QuotedClaim(
                    question=question,
                    claim=claim,
                    heading=passage.heading,
                    passage=passage.text,
                    quoted=True,
                    corpus_coverage=features.question_corpus_coverage,
                )
            )
            relevance = max(relevance, confirmed or 0.0)
        return relevance

    def verify_now(self, question: str, claims: Sequence[str], passages: Sequence[ScoredPassage]) -> Verification:
        """`verify`, in the calling thread (the generator's per-part judgment runs in its worker thread)."""
        if not claims:
            return Verification(verdicts=[])
        embedder = self.relevance.sentences.embedder
        q_vec = embedder.embed_query(question)
        claim_vecs = self.relevance.sentences.get(list(claims))
        by_id = {p.id: p for p in passages}
        verdicts: list[ClaimVerdict] = []
        for claim, c_vec, checked in zip(claims, claim_vecs, self.support.check(claims, passages), strict=True):
            chosen = supporting(checked)
            if not chosen:
                verdicts.append(MISSING_VERDICT)
                continue
            relevance = self.claim_relevance(
                question, claim, c_vec, q_vec, [by_id[s.passage_id] for s in chosen], quoted=chosen[0].quoted
            )
            verdicts.append(
                ClaimVerdict(
                    support=round(chosen[0].score, 4),
                    supporting_passage_ids=[s.passage_id for s in chosen],
                    relevance=round(relevance, 4),
                    quoted=chosen[0].quoted,
                    evidence=evidence_of(checked),
                    veto=veto_of(checked, chosen[0].passage_id),
                    passages=passage_verdicts(checked),
                )
            )
        return Verification(verdicts=verdicts)

    async def verify(self, question: str, claims: Sequence[str], passages: Sequence[ScoredPassage]) -> Verification:
        if not claims:
            return Verification(verdicts=[])
        return await asyncio.to_thread(self.verify_now, question, claims, passages)

    def sentence_relevance_now(self, question: str, passages: Sequence[ScoredPassage]) -> list[list[SentenceScore]]:
        """Each sentence of each passage read as a claim: how well it answers the question, as a claim's
        relevance is checked."""
        q_vec = self.relevance.sentences.embedder.embed_query(question)
        out: list[list[SentenceScore]] = []
        for passage in passages:
            ranges = T.sentence_ranges(passage.text, passage.sentences)
            if not ranges:
                out.append([])
                continue
            vectors = self.relevance.sentences.get([t for _, _, t in ranges])
            out.append(
                [
                    SentenceScore(start, end, round(self.relevance_of(question, text, vec, q_vec, passage), 4))
                    for (start, end, text), vec in zip(ranges, vectors, strict=True)
                ]
            )
        return out

    async def sentence_relevance(self, question: str, passages: Sequence[ScoredPassage]) -> list[list[SentenceScore]]:
        return await asyncio.to_thread(self.sentence_relevance_now, question, passages)


def veto_of(checked: Sequence[PassageSupport], passage_id: str) -> str | None:
    """The veto that capped the claim's support in the passage it rests on."""
    return next((s.veto for s in checked if s.passage_id == passage_id), None)


def passage_verdicts(checked: Sequence[PassageSupport]) -> list[PassageSupport]:
    """The rules' support in each passage, best first: what a reading judge ranks and vetoes by."""
    return sorted(checked, key=lambda s: -s.score)


def evidence_of(checked: Sequence[PassageSupport]) -> list[EvidenceSpan]:
    """Where the support check found a claim in each passage it read, best first."""
    ranked = sorted(checked, key=lambda s: -s.score)
    return [EvidenceSpan(passage_id=s.passage_id, start=s.start, end=s.end) for s in ranked if s.end > s.start]


def build_rule_support(
    embedder: Embedder,
    sentences: SentenceEmbeddings,
    coefficients: Coefficients | None = None,
    words: WordVectors | None = None,
) -> RuleSupport:
    coef = coefficients or load_coefficients()
    return RuleSupport(sentences, words or WordVectors(embedder), coef.support)


def build_feature_verifier(
    embedder: Embedder, sentences: SentenceEmbeddings | None = None, words: WordVectors | None = None
) -> FeatureVerifier:
    sentences = sentences or SentenceEmbeddings(embedder)
    coef = load_coefficients()
    words = words or WordVectors(embedder)
    return FeatureVerifier(RuleSupport(sentences, words, coef.support), RelevanceExtractor(sentences, words), coef)
