"""The feature verifier: a calibrated score, over hand-built features, of whether a passage supports a claim
as the answer to the question. Both profiles run it as `Profile.verifier` under `LOCAL_MODELS=features`
(the default); the trained cross-encoder that replaces it under `LOCAL_MODELS=trained` is `provenance.verifier`.

The score is two logistic regressions, over embedding similarity and lexical, number, date, entity and
negation agreement (support), and over whether the claim addresses the question (responsiveness). It
shares only the embedder, and the sentence-vector cache, with the extractive generator; its coefficients
come from `evals/calibrate_verifier.py`, not from the generator's scoring.
"""

from __future__ import annotations

import asyncio
import math
import re
import threading
from collections import OrderedDict
from collections.abc import Sequence
from pathlib import Path
from typing import NamedTuple

import msgspec
import numpy as np

from provenance import text as T
from provenance.embedder import Embedder
from provenance.passages import ScoredPassage
from provenance.ports import MISSING_VERDICT, ClaimVerdict, Verification

COEFFICIENTS_PATH = Path(__file__).resolve().parent / "data" / "local_verifier.json"
FEATURE_VERIFIER = "local-calibrated-verifier"


class SentenceEmbeddings:
    """LRU cache of sentence vectors: passages repeat across questions, so most lookups are hits."""

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


# --- answer-type agreement ----------------------------------------------------------------------

_TIME = re.compile(r"\b\d{1,2}(:\d{2})?\s?(am|pm|a\.m\.|p\.m\.)|\b(noon|midnight|\d{1,2}:\d{2})\b", re.I)
_DAY = re.compile(r"\b(monday|tuesday|wednesday|thursday|friday|saturday|sunday|weekend|weekday)s?\b", re.I)
_MONEY = re.compile(
    r"[$£€]\s?\d|\b\d+(\.\d+)?\s?(dollars|usd|pounds|euros)\b|\bfree\b|\bno (extra )?(cost|charge)", re.I
)
_YEAR = re.compile(r"\b(1[0-9]{3}|20[0-9]{2})s?\b|\bcentur(y|ies)\b", re.I)


def expected_answer_type(question: str) -> str | None:
    q = question.lower()
    if re.search(r"\bhow much\b|\bcost\b|\bprice\b|\bfee\b|\bcharge\b|\bpay\b", q):
        return "money"
    if re.search(r"\bwhat time\b|\bhours?\b|\bopen\b|\bclose\b", q) and not re.search(r"\bhow many hours\b", q):
        return "time"
    if re.search(r"\bhow (many|long|old|often|far|big|large)\b|\bminimum\b|\bmaximum\b|\blimit\b", q):
        return "number"
    if re.search(r"^(when|what (year|date|day|century))\b|\bwhen\b", q):
        return "date"
    if re.search(r"\b(email|e-mail|contact|phone|call)\b", q):
        return "contact"
    if re.search(r"^(who|whom|whose)\b", q):
        return "person"
    return None


def answer_type_match(kind: str | None, claim: str) -> float:
    if kind is None:
        return 1.0
    if kind == "money":
        return 1.0 if _MONEY.search(claim) else 0.0
    if kind == "time":
        return 1.0 if _TIME.search(claim) or _DAY.search(claim) else 0.0
    if kind == "number":
        return 1.0 if T.bare_numbers(claim) else 0.0
    if kind == "date":
        return 1.0 if T.months(claim) or _YEAR.search(claim) or _DAY.search(claim) or T.bare_numbers(claim) else 0.0
    if kind == "contact":
        return 1.0 if T.emails(claim) or re.search(r"\d{3}[ -]?\d{3,4}", claim) else 0.0
    if kind == "person":
        return 1.0 if T.entities(claim) else 0.0
    return 1.0


# --- premise check --------------------------------------------------------------------------------

_PREMISE = re.compile(
    r"^\s*(since|now that|given that|as|because|seeing that|considering that)\s+(?P<premise>[^,?]+),",
    re.IGNORECASE,
)


def question_premise(question: str) -> str | None:
    """A clause the question takes for granted ("Since the pool is open late, ..."): it must be supported."""
    m = _PREMISE.match(question)
    return m.group("premise") if m else None


# --- the verifier ---------------------------------------------------------------------------------

FEATURES = (
    "claim_sentence_sim",
    "claim_term_coverage",
    "numbers_supported",
    "entities_supported",
    "negation_agrees",
    "question_coverage",
    "question_passage_coverage",
    "question_claim_sim",
    "answer_type_match",
    "question_numbers_supported",
    "question_corpus_coverage",
)

# The score is P(supported) x P(responsive): two logistic models, each fitted on the data that can teach
# it. Support (is the claim what the passage says?) learns from hallucinated, number-swapped and
# negated claims; responsiveness (does the claim answer this question?) from other sentences of the
# same passage and from questions about things the passage never mentions.
SUPPORT_FEATURES = FEATURES[:5]
RELEVANCE_FEATURES = FEATURES[5:]


class LogisticModel(msgspec.Struct, frozen=True):
    features: list[str]
    weights: list[float]
    intercept: float

    def probability(self, values: Sequence[float]) -> float:
        z = sum(w * v for w, v in zip(self.weights, values, strict=True)) + self.intercept
        return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, z))))


class Coefficients(msgspec.Struct, frozen=True):
    support: LogisticModel
    relevance: LogisticModel
    source: str = ""


def load_coefficients(path: Path = COEFFICIENTS_PATH) -> Coefficients:
    coef = msgspec.json.decode(path.read_bytes(), type=Coefficients)
    if tuple(coef.support.features) != SUPPORT_FEATURES or tuple(coef.relevance.features) != RELEVANCE_FEATURES:
        raise ValueError(f"{path} was fitted on other features than the verifier computes ({FEATURES})")
    return coef


class WordVectors:
    """Vectors of single words, for soft term matching ("age" answers "how old")."""

    def __init__(self, embedder: Embedder, capacity: int = 50_000) -> None:
        self.cache = SentenceEmbeddings(embedder, capacity)

    def similarity(self, a: Sequence[str], b: Sequence[str]) -> np.ndarray:
        if not a or not b:
            return np.zeros((len(a), len(b)))
        va, vb = self.cache.get(list(a)), self.cache.get(list(b))
        return np.asarray(va @ vb.T)


def _surface_terms(text: str, question: bool = False) -> dict[str, str]:
    """stem -> a surface form of it, for the content words of text."""
    out: dict[str, str] = {}
    for w in T.words(text):
        if w in T.STOPWORDS or w in T.QUESTION_WORDS or (len(w) < 2 and not w.isdigit()):
            continue
        if question and w in T.QUESTION_FILLER:
            continue
        out.setdefault(T.stem(w), w)
    return out


def soft_match(similarity: float) -> float:
    """Word-vector similarity to coverage: near-synonyms ("fee"/"cost" 0.71, "old"/"age" 0.69) count,
    mere neighbours ("acrylic"/"plywood" 0.40, "parking"/"bike" 0.45) do not."""
    return min(1.0, max(0.0, (similarity - 0.45) / 0.30))


class FeatureExtractor:
    """Computes the verifier's features for (question, claim, passage); each lies within [0, 1]."""

    def __init__(self, sentences: SentenceEmbeddings, words: WordVectors) -> None:
        self.sentences = sentences
        self.words = words
        self.vocabulary: dict[str, str] = {}

    def set_corpus(self, passage_texts: Sequence[str]) -> None:
        """Learn the words the whole corpus uses: a question about something it never mentions (a dog,
        car parking, acrylic) cannot be answered from it, however close a passage looks."""
        vocabulary: dict[str, str] = {}
        for text in passage_texts:
            for stem_, word in _surface_terms(text).items():
                vocabulary.setdefault(stem_, word)
        words = list(vocabulary.values())
        for start in range(0, len(words), 256):
            self.words.cache.get(words[start : start + 256])
        self.vocabulary = vocabulary

    def _soft_coverage(self, question: str, covering: dict[str, str]) -> tuple[float, float]:
        """(mean, min) over the question's terms of how well `covering` contains each; the best sub-question."""
        best = (1.0, 1.0)
        best_key = -1.0
        for part in T.sub_questions(question):
            q_terms = _surface_terms(part, question=True)
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
        self,
        question: str,
        claim: str,
        claim_vec: np.ndarray,
        question_vec: np.ndarray,
        passage: ScoredPassage,
    ) -> list[float]:
        sentences = T.split_sentences(passage.text)
        section = passage.heading.split(" > ")[-1]
        p_terms = T.content_terms(passage.text) | T.content_terms(section)
        c_terms = T.content_terms(claim)
        if sentences:
            sims = self.sentences.get(sentences) @ claim_vec
            best = int(np.argmax(sims))
            best_sim, best_sentence = float(sims[best]), sentences[best]
        else:
            best_sim, best_sentence = 0.0, ""
        q_mean, _ = self._soft_coverage(question, _surface_terms(claim) | _surface_terms(section))
        # Question terms the whole passage lacks (not even a near-synonym) are what a gap, a false premise
        # or a swapped entity looks like; the claim-level coverage above can't see the passage's context.
        # The mean, not the minimum: members phrase questions in words a handbook doesn't use ("sign up",
        # "hourly charge"), and one such word must not sink a claim the other features support.
        q_passage, _ = self._soft_coverage(question, _surface_terms(passage.text) | _surface_terms(section))
        q_nums = T.bare_numbers(question)
        _, q_corpus = self._soft_coverage(question, self.vocabulary | _surface_terms(passage.text + " " + section))
        return [
            max(0.0, best_sim),
            T.overlap(c_terms, p_terms),
            1.0 if T.bare_numbers(claim) <= T.bare_numbers(passage.text) else 0.0,
            T.overlap(T.entities(claim), p_terms | T.entities(passage.text)),
            1.0 if T.has_negation(claim) == T.has_negation(best_sentence) else 0.0,
            q_mean,
            q_passage,
            max(0.0, float(claim_vec @ question_vec)),
            answer_type_match(expected_answer_type(question), claim),
            1.0 if q_nums <= T.bare_numbers(passage.text + " " + claim) else 0.0,
            q_corpus,
        ]


class PassageScore(NamedTuple):
    score: float
    features: list[float]
    quoted: bool
    passage_id: str


class FeatureVerifier:
    name = FEATURE_VERIFIER

    def __init__(self, extractor: FeatureExtractor, coefficients: Coefficients | None = None) -> None:
        self.extractor = extractor
        self.coef = coefficients or load_coefficients()

    def probability(self, features: Sequence[float], quoted: bool = False) -> float:
        # A claim that is one of the passage's sentences, word for word, is what the passage says: its support
        # is certain, not an estimate, and only whether it answers the question is left to judge.
        support = 1.0 if quoted else self.coef.support.probability(features[: len(SUPPORT_FEATURES)])
        relevance = self.coef.relevance.probability(features[len(SUPPORT_FEATURES) :])
        return support * relevance

    def score_passages(
        self,
        question: str,
        claim: str,
        claim_vec: np.ndarray,
        question_vec: np.ndarray,
        passages: Sequence[ScoredPassage],
    ) -> list[PassageScore]:
        """The claim's score against each passage, with the features and quote check behind it."""
        out = []
        for p in passages:
            features = self.extractor.features(question, claim, claim_vec, question_vec, p)
            quoted = T.is_sentence_of(claim, p.text)
            out.append(PassageScore(self.probability(features, quoted), features, quoted, p.id))
        return out

    def verify_now(self, question: str, claims: Sequence[str], passages: Sequence[ScoredPassage]) -> Verification:
        """`verify`, in the calling thread (the generator's per-part judgment runs in its worker thread)."""
        embedder = self.extractor.sentences.embedder
        q_vec = embedder.embed_query(question)
        claim_vecs = self.extractor.sentences.get(list(claims))
        premise = question_premise(question)
        all_terms: set[str] = set()
        for p in passages:
            all_terms |= T.content_terms(p.text) | T.content_terms(p.heading)
        # A question built on a premise the passages never state ("Since the pool is open late...") is not
        # answered by any claim, however well supported the claim is on its own.
        premise_ok = premise is None or T.overlap(T.content_terms(premise), all_terms) >= 0.75
        verdicts: list[ClaimVerdict] = []
        for claim, c_vec in zip(claims, claim_vecs, strict=True):
            scored = self.score_passages(question, claim, c_vec, q_vec, passages)
            if not scored:
                verdicts.append(MISSING_VERDICT)
                continue
            best = max(s.score for s in scored)
            if not premise_ok:
                best = min(best, 0.2)
            # The best-scoring passage always counts as the claim's support, so the lexical check
            # compares the claim's numbers with the passage the verifier actually relied on.
            ranked = sorted(scored, key=lambda x: -x.score)
            support = [ranked[0].passage_id] + [
                s.passage_id for s in ranked[1:] if s.score >= 0.5 and s.score >= best - 0.15
            ]
            verdicts.append(ClaimVerdict(score=round(best, 4), supporting_passage_ids=support, quoted=ranked[0].quoted))
        return Verification(verdicts=verdicts)

    async def verify(self, question: str, claims: Sequence[str], passages: Sequence[ScoredPassage]) -> Verification:
        if not claims:
            return Verification(verdicts=[])
        return await asyncio.to_thread(self.verify_now, question, claims, passages)


def build_feature_verifier(embedder: Embedder, sentences: SentenceEmbeddings | None = None) -> FeatureVerifier:
    sentences = sentences or SentenceEmbeddings(embedder)
    return FeatureVerifier(FeatureExtractor(sentences, WordVectors(embedder)))
