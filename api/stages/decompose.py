"""Claim decomposition: the answer as atomic claims; claims about the sources themselves are dropped."""

from __future__ import annotations

import msgspec

from provenance.models import DecompositionStage
from provenance.profiles.local import is_meta_claim
from provenance.profiles.ports import Decomposer, Usage
from provenance.stages.timing import Timer


class DecompositionOutcome(msgspec.Struct, frozen=True):
    stage: DecompositionStage
    claims: list[str]
    usage: Usage


def filter_claims(claims: list[str]) -> tuple[list[str], list[str]]:
    kept: list[str] = []
    dropped: list[str] = []
    for claim in claims:
        text = claim.strip()
        if not text:
            continue
        (dropped if is_meta_claim(text) else kept).append(text)
    return list(dict.fromkeys(kept)), dropped


async def decompose(question: str, answer: str, decomposer: Decomposer) -> DecompositionOutcome:
    timer = Timer()
    result = await decomposer.decompose(question, answer)
    kept, dropped = filter_claims(result.claims)
    stage = DecompositionStage(
        status="ok",
        ms=timer.ms,
        model=result.usage.model,
        claim_count=len(kept),
        dropped=dropped,
        detail=f"dropped {len(dropped)} claim(s) about the sources themselves" if dropped else None,
    )
    return DecompositionOutcome(stage, kept, result.usage)
