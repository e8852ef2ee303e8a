"""Entailment: every verifier scores every claim against the passages. With two verifiers (the local one
and a model), a claim is only as supported as the less convinced of the two."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence

import msgspec

from provenance.models import ClaimResult, EntailmentStage
from provenance.passages import ScoredPassage
from provenance.ports import MISSING_VERDICT, ClaimVerdict, Usage, Verification, Verifier
from provenance.timing import Timer


class EntailmentOutcome(msgspec.Struct, frozen=True):
    stage: EntailmentStage
    claims: list[ClaimResult]
    usages: list[Usage]


def combine(claims: Sequence[str], local: Verification, model: Verification | None) -> list[ClaimResult]:
    results = []
    for i, claim in enumerate(claims):
        lv = local.verdicts[i]
        mv: ClaimVerdict | None = None
        if model is not None:
            mv = model.verdicts[i] if i < len(model.verdicts) else MISSING_VERDICT
        if mv is None:
            score, support = lv.score, list(lv.supporting_passage_ids)
        else:
            score = min(lv.score, mv.score)
            agreed = [pid for pid in lv.supporting_passage_ids if pid in mv.supporting_passage_ids]
            # Both must agree; when they name different passages, trust the more doubtful verifier's.
            support = agreed or list((lv if lv.score <= mv.score else mv).supporting_passage_ids)
        results.append(
            ClaimResult(
                text=claim,
                score=round(score, 4),
                supporting_passage_ids=support,
                lexical_overlap=0.0,
                local_score=round(lv.score, 4),
                model_score=None if mv is None else round(mv.score, 4),
                quoted=lv.quoted,
            )
        )
    return results


async def entail(
    question: str,
    claims: Sequence[str],
    passages: Sequence[ScoredPassage],
    verifiers: Sequence[Verifier],
    *,
    model_verdicts: tuple[str, Verification] | None = None,
) -> EntailmentOutcome:
    """`model_verdicts` (the model verifier's name and its verdicts) are ones that arrived with the claims
    (one combined call); then only `verifiers[0]`, the local verifier, runs here, and both still count."""
    timer = Timer()
    if model_verdicts is not None:
        local_verifier = verifiers[0]
        own = await local_verifier.verify(question, claims, passages)
        model_name, given = model_verdicts
        names = [local_verifier.name, model_name]
        paid = [v.usage for v in (own, given) if v.usage is not None]
        detail = "the model's verdicts came with the claims (one call); the local verifier scored every claim"
        stage = EntailmentStage(status="ok", ms=timer.ms, verifiers=names, detail=detail)
        return EntailmentOutcome(stage, combine(claims, own, given), paid)
    verifications = await asyncio.gather(*(v.verify(question, claims, passages) for v in verifiers))
    local = verifications[0]
    model = verifications[1] if len(verifications) > 1 else None
    stage = EntailmentStage(status="ok", ms=timer.ms, verifiers=[v.name for v in verifiers])
    usages = [v.usage for v in verifications if v.usage is not None]
    return EntailmentOutcome(stage, combine(claims, local, model), usages)
