"""Entailment: the profile's verifier judges every claim against the passages, twice and apart: support and
relevance. When a model gave its own verdicts with the claims, a claim is only as supported as the less
convinced of the two (support is never the model's alone), and whether it answers the question is the
model's verdict (relevance needs reading, which the model can do).

When a reading judge judged the claim (JUDGE), its verdicts, under the rules' vetoes, are the claim's support
and relevance: the generator's own verdicts and the rules' score are recorded beside them and do not count
(the generator never grades itself)."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from provenance.ports import MISSING_VERDICT, ClaimVerdict, ScoredPassage, Usage, Verification, Verifier
from provenance.stages.decompose import DecompositionOutcome
from provenance.timing import Timer
from provenance.wire import ClaimResult, EntailmentStage


class EntailmentOutcome(msgspec.Struct, frozen=True):
    stage: EntailmentStage
    claims: list[ClaimResult]
    usages: list[Usage]


def combine(claims: Sequence[str], local: Verification, model: Verification | None) -> list[ClaimResult]:
    results = []
    for i, claim in enumerate(claims):
        lv = local.verdicts[i]
        mv: ClaimVerdict | None = None
        if model is not None and (model.local_only_from is None or i < model.local_only_from):
            mv = model.verdicts[i] if i < len(model.verdicts) else MISSING_VERDICT
        if mv is None or lv.judge is not None:
            support, ids = lv.support, list(lv.supporting_passage_ids)
        else:
            support = min(lv.support, mv.support)
            agreed = [pid for pid in lv.supporting_passage_ids if pid in mv.supporting_passage_ids]
            # Both must agree; when they name different passages, trust the more doubtful verifier's.
            ids = agreed or list((lv if lv.support <= mv.support else mv).supporting_passage_ids)
        judge = mv if mv is not None and mv.relevance is not None and lv.judge is None else lv
        results.append(
            ClaimResult(
                text=claim,
                support=round(support, 4),
                relevance=round(judge.relevance or 0.0, 4),
                supporting_passage_ids=ids,
                lexical_overlap=0.0,
                local_support=round(lv.support if lv.rules_support is None else lv.rules_support, 4),
                local_relevance=_rounded(lv.relevance if lv.judge is None else lv.rules_relevance),
                model_support=None if mv is None else round(mv.support, 4),
                model_relevance=None if mv is None or mv.relevance is None else round(mv.relevance, 4),
                quoted=lv.quoted,
                # The local support check's windows in the passages the claim finally rests on.
                evidence=[e for e in lv.evidence if e.passage_id in ids],
                veto=lv.veto,
                judge=lv.judge,
            )
        )
    return results


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)


async def entail(
    question: str, decomposed: DecompositionOutcome, passages: Sequence[ScoredPassage], verifier: Verifier
) -> EntailmentOutcome:
    """`verifier` (the profile's own, on this machine) scores every claim. The model's verdicts that arrived
    with the claims (one combined call, `decomposed.verification`) count too."""
    timer = Timer()
    claims = decomposed.claims
    own = await verifier.verify(question, claims, passages)
    names = [verifier.name]
    given = decomposed.verification
    detail = None
    if given is not None:
        names.append(decomposed.verified_by or "model")
        detail = "the model's verdicts came with the claims (one call); the local verifier scored every claim"
    usages = [v.usage for v in (own, given) if v is not None and v.usage is not None]
    judged = next((v.judge for v in own.verdicts if v.judge is not None), None)
    if judged is not None and given is not None:
        detail = "the reading judge decided support and relevance; the model's own verdicts are recorded beside them"
    stage = EntailmentStage(
        status="ok",
        ms=timer.ms,
        verifiers=names,
        detail=detail,
        judge=None if judged is None else judged.model,
        judge_calibrated=None if judged is None else judged.calibrated,
    )
    return EntailmentOutcome(stage, combine(claims, own, given), usages)
