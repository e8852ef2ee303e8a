"""The trained verifier: a cross-encoder, separate from every generator, that scores each claim against
each retrieved passage. With `LOCAL_MODELS=trained` both profiles run it as `Profile.verifier`.

Its question is not only "does the passage say this?" but "does the passage support this as the answer to
the question?". A claim that is a sentence of the passage word for word is certainly what the passage
says, and is still judged on whether it answers the question: a true sentence that answers something else
scores low.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import msgspec

from provenance import text as T
from provenance.cross_encoders import Calibration, PairVerifier, get_verifier, load_calibration, sigmoid
from provenance.passages import ScoredPassage
from provenance.ports import MISSING_VERDICT, ClaimVerdict, Verification

TRAINED_VERIFIER = "local-trained-verifier"
# Evidence for a claim that is not a sentence of the passage: the passage's sentences that share most of
# its words, this many, in document order.
EVIDENCE_SENTENCES = 2


class PassageScore(msgspec.Struct, frozen=True):
    passage_id: str
    score: float
    # The claim is one of the passage's sentences, word for word: its support is certain, and the score
    # says only whether it answers the question.
    quoted: bool


def evidence_for(claim: str, passage_text: str) -> tuple[str, bool]:
    """What the claim is checked against in one passage, and whether it is quoted from it."""
    if T.is_sentence_of(claim, passage_text):
        return claim, True
    sentences = T.split_sentences(passage_text)
    if len(sentences) <= EVIDENCE_SENTENCES:
        return " ".join(sentences), False
    terms = T.content_terms(claim)
    ranked = sorted(range(len(sentences)), key=lambda i: -len(terms & T.content_terms(sentences[i])))
    keep = sorted(ranked[:EVIDENCE_SENTENCES])
    return " ".join(sentences[i] for i in keep), False


class TrainedVerifier:
    name = TRAINED_VERIFIER

    def __init__(self, model: PairVerifier, calibration: Calibration) -> None:
        self.model = model
        self.calibration = calibration

    def probability(self, logit: float) -> float:
        c = self.calibration
        return sigmoid(c.verifier_a * logit + c.verifier_b)

    async def score_passages(self, question: str, claim: str, passages: Sequence[ScoredPassage]) -> list[PassageScore]:
        """The claim's calibrated score against each passage that could support it. A claim quoted word for
        word is scored against the passages that hold it (it is its own evidence there, the strongest any
        passage can give: one model call covers them all); any other claim against every passage.

        A question that asks two things is answered by a claim that answers either: the score is the best
        over the whole question and its parts."""
        evidence = [(p, *evidence_for(claim, p.text)) for p in passages]
        if any(quoted for *_, quoted in evidence):
            evidence = [e for e in evidence if e[2]]
        questions = list(dict.fromkeys([question, *T.sub_questions(question)]))
        unique = list(dict.fromkeys(e for _, e, _ in evidence))
        items = [(q, claim, e) for e in unique for q in questions]
        logits: dict[str, float] = {}
        for (_, _, e), logit in zip(items, await self.model.logits_async(items), strict=True):
            logits[e] = max(logit, logits.get(e, logit))
        return [PassageScore(p.id, self.probability(logits[e]), quoted) for p, e, quoted in evidence]

    async def _verdict(self, question: str, claim: str, passages: Sequence[ScoredPassage]) -> ClaimVerdict:
        scored = sorted(await self.score_passages(question, claim, passages), key=lambda s: -s.score)
        if not scored:
            return MISSING_VERDICT
        best = scored[0].score
        # The best-scoring passage always counts as the claim's support, so the lexical check compares the
        # claim's numbers with the passage the verifier relied on.
        support = [scored[0].passage_id] + [
            s.passage_id for s in scored[1:] if s.score >= 0.5 and s.score >= best - 0.15
        ]
        return ClaimVerdict(score=round(best, 4), supporting_passage_ids=support, quoted=scored[0].quoted)

    async def verify(self, question: str, claims: Sequence[str], passages: Sequence[ScoredPassage]) -> Verification:
        # Every claim's model work is submitted at once, so it runs as one batch.
        verdicts = await asyncio.gather(*(self._verdict(question, c, passages) for c in claims))
        return Verification(verdicts=list(verdicts))


def build_trained_verifier(threads: int = 2) -> TrainedVerifier:
    return TrainedVerifier(get_verifier(threads), load_calibration())
