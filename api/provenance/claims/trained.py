"""The trained verifier (`LOCAL_VERIFIER=trained`): a cross-encoder, separate from every generator, that reads
(question, claim, evidence) and judges whether the evidence supports the claim *as the answer to the
question*. That is a relevance judgment, and it is this verifier's one job: support, which must not depend
on the question, is the question-free support check the feature verifier uses too (`claims.support`).
A claim quoted word for word is certainly what its passage says, and is judged only on whether it answers.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

from provenance import text as T
from provenance.claims.features import evidence_of, passage_verdicts, veto_of
from provenance.claims.rules import supporting
from provenance.inference.cross_encoders import Calibration, PairVerifier, get_verifier, load_calibration, sigmoid
from provenance.ports import (
    MISSING_VERDICT,
    ClaimVerdict,
    CorpusText,
    ScoredPassage,
    SentenceScore,
    SupportCheck,
    Verification,
)

TRAINED_VERIFIER = "local-trained-verifier"
# Evidence for a claim that is not a sentence of the passage: the passage's sentences that share most of
# its words, this many, in document order.
EVIDENCE_SENTENCES = 2


def evidence_for(claim: str, passage_text: str, spans: Sequence[tuple[int, int]] | None = None) -> tuple[str, bool]:
    """What the claim is checked against in one passage, and whether it is quoted from it."""
    if T.is_sentence_of(claim, passage_text, spans):
        return claim, True
    sentences = [s for _, _, s in T.sentence_ranges(passage_text, spans)]
    if len(sentences) <= EVIDENCE_SENTENCES:
        return " ".join(sentences), False
    terms = T.content_terms(claim)
    ranked = sorted(range(len(sentences)), key=lambda i: -len(terms & T.content_terms(sentences[i])))
    keep = sorted(ranked[:EVIDENCE_SENTENCES])
    return " ".join(sentences[i] for i in keep), False


class TrainedVerifier:
    name = TRAINED_VERIFIER

    def __init__(self, model: PairVerifier, calibration: Calibration, support: SupportCheck) -> None:
        self.model = model
        self.calibration = calibration
        self.support = support

    def set_corpus(self, passages: Sequence[CorpusText]) -> None:
        self.support.set_corpus(passages)

    def probability(self, logit: float) -> float:
        c = self.calibration
        return sigmoid(c.verifier_a * logit + c.verifier_b)

    async def score_passages(self, question: str, claim: str, passages: Sequence[ScoredPassage]) -> dict[str, float]:
        """The claim's calibrated score against each passage that could support it, by passage id. A claim
        quoted word for word is scored against the passages that hold it (it is its own evidence there, the
        strongest any passage can give: one model call covers them all); any other claim against every passage.

        A question that asks two things is answered by a claim that answers either: the score is the best
        over the whole question and its parts."""
        evidence = [(p, *evidence_for(claim, p.text, p.sentences)) for p in passages]
        if any(quoted for *_, quoted in evidence):
            evidence = [e for e in evidence if e[2]]
        questions = list(dict.fromkeys([question, *T.sub_questions(question)]))
        unique = list(dict.fromkeys(e for _, e, _ in evidence))
        items = [(q, claim, e) for e in unique for q in questions]
        logits: dict[str, float] = {}
        for (_, _, e), logit in zip(items, await self.model.logits_async(items), strict=True):
            logits[e] = max(logit, logits.get(e, logit))
        return {p.id: self.probability(logits[e]) for p, e, _ in evidence}

    async def _verdict(self, question: str, claim: str, passages: Sequence[ScoredPassage]) -> ClaimVerdict:
        checked = await asyncio.to_thread(self.support.check, [claim], passages)
        chosen = supporting(checked[0])
        if not chosen:
            return MISSING_VERDICT
        answers = await self.score_passages(question, claim, passages)
        # Whether the claim answers the question, read against the passages that state it (any passage, when
        # none of those was read).
        ids = [s.passage_id for s in chosen]
        relevance = max((answers[pid] for pid in ids if pid in answers), default=max(answers.values(), default=0.0))
        return ClaimVerdict(
            support=round(chosen[0].score, 4),
            supporting_passage_ids=ids,
            relevance=round(relevance, 4),
            quoted=chosen[0].quoted,
            evidence=evidence_of(checked[0]),
            veto=veto_of(checked[0], chosen[0].passage_id),
            passages=passage_verdicts(checked[0]),
        )

    async def verify(self, question: str, claims: Sequence[str], passages: Sequence[ScoredPassage]) -> Verification:
        # Every claim's model work is submitted at once, so it runs as one batch.
        verdicts = await asyncio.gather(*(self._verdict(question, c, passages) for c in claims))
        return Verification(verdicts=list(verdicts))

    async def sentence_relevance(self, question: str, passages: Sequence[ScoredPassage]) -> list[list[SentenceScore]]:
        """Each sentence of each passage read as a quoted claim (its own evidence): how well it answers the
        question or, for a two-part question, either part. One batch for them all."""
        questions = list(dict.fromkeys([question, *T.sub_questions(question)]))
        ranges = [T.sentence_ranges(p.text, p.sentences) for p in passages]
        items = [(q, text, text) for found in ranges for _, _, text in found for q in questions]
        logits = iter(await self.model.logits_async(items) if items else [])
        return [
            [
                SentenceScore(start, end, round(self.probability(max(next(logits) for _ in questions)), 4))
                for start, end, _ in found
            ]
            for found in ranges
        ]


def build_trained_verifier(support: SupportCheck, threads: int = 2) -> TrainedVerifier:
    return TrainedVerifier(get_verifier(threads), load_calibration(), support)
