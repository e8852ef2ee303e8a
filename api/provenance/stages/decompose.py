"""Claim decomposition: the answer as atomic claims; claims about the sources themselves are dropped."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from provenance.claims import split_claims
from provenance.models import DecompositionStage
from provenance.passages import ScoredPassage
from provenance.ports import MISSING_VERDICT, ClaimVerdict, DecomposeAndVerify, Decomposer, Usage, Verification
from provenance.timing import Timer


class DecompositionOutcome(msgspec.Struct, frozen=True):
    stage: DecompositionStage
    claims: list[str]
    usage: Usage


def _stage(timer: Timer, model: str, kept: list[str], dropped: list[str], detail: str | None) -> DecompositionStage:
    if dropped:
        note = f"dropped {len(dropped)} claim(s) about the sources themselves"
        detail = f"{detail}; {note}" if detail else note
    return DecompositionStage(
        status="ok", ms=timer.ms, model=model, claim_count=len(kept), dropped=dropped, detail=detail
    )


async def decompose(question: str, answer: str, decomposer: Decomposer) -> DecompositionOutcome:
    timer = Timer()
    result = await decomposer.decompose(question, answer)
    kept, dropped = split_claims(result.claims)
    return DecompositionOutcome(_stage(timer, result.usage.model, kept, dropped, None), kept, result.usage)


async def decompose_and_verify(
    question: str, answer: str, passages: Sequence[ScoredPassage], checker: DecomposeAndVerify
) -> tuple[DecompositionOutcome, Verification]:
    """Claims and the model's verdicts from one call. Claims are cleaned as `decompose` cleans them, and
    each verdict stays with its claim; a claim the model gave no verdict for scores 0."""
    timer = Timer()
    result, verification = await checker.decompose_and_verify(question, answer, passages)
    kept: list[str] = []
    verdicts: list[ClaimVerdict] = []
    dropped: list[str] = []
    for i, claim in enumerate(result.claims):
        clean, meta = split_claims([claim])
        dropped += meta
        if not clean or clean[0].casefold() in {k.casefold() for k in kept}:
            continue
        kept.append(clean[0])
        verdicts.append(verification.verdicts[i] if i < len(verification.verdicts) else MISSING_VERDICT)
    detail = f"claims and the model's entailment verdicts in one call ({checker.name})"
    stage = _stage(timer, result.usage.model, kept, dropped, detail)
    return DecompositionOutcome(stage, kept, result.usage), Verification(verdicts=verdicts, usage=verification.usage)
