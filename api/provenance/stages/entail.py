"""Entailment: the profile's verifier judges every claim against the passages, twice and apart: support and
relevance. Whose verdict wins, when the generator gave its own or a reading judge read the claims, is
`claims.verdict.combine`'s to say; this stage runs the verifier and records who had a say."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from provenance.claims.verdict import combine
from provenance.ports import ScoredPassage, Usage, Verifier
from provenance.stages.decompose import DecompositionOutcome
from provenance.timing import Timer
from provenance.wire import ClaimResult, EntailmentStage


class EntailmentOutcome(msgspec.Struct, frozen=True):
    stage: EntailmentStage
    claims: list[ClaimResult]
    usages: list[Usage]


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
    judge_record = next((v.judge for v in own.verdicts if v.judge is not None), None)
    if judge_record is not None and given is not None:
        detail = "the reading judge decided support and relevance; the model's own verdicts are recorded beside them"
    stage = EntailmentStage(
        status="ok",
        ms=timer.ms,
        verifiers=names,
        detail=detail,
        judge=None if judge_record is None else judge_record.model,
        judge_calibrated=None if judge_record is None else judge_record.calibrated,
    )
    return EntailmentOutcome(stage, combine(claims, own, given), usages)
