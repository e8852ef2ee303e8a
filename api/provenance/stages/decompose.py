"""Claim decomposition: the answer as atomic claims; claims about the sources themselves are dropped."""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from provenance.ports import (
    MISSING_VERDICT,
    ClaimVerdict,
    DecomposeAndVerify,
    Decomposer,
    ScoredPassage,
    Usage,
    Verification,
)
from provenance.stages.claim_filters import in_answer, split_claims, uncovered_sentences
from provenance.timing import Timer
from provenance.wire import DecompositionStage


class DecompositionOutcome(msgspec.Struct, frozen=True):
    """The claims, and, when one model call gave them with its verdicts (`decompose_and_verify`), those
    verdicts (one per claim, or up to `local_only_from`) and the name of what gave them: entailment counts
    them beside the local verifier's."""

    stage: DecompositionStage
    claims: list[str]
    usage: Usage
    verification: Verification | None = None
    verified_by: str | None = None

    @property
    def usages(self) -> list[Usage]:
        # The verdicts' own usage, if any, is entailment's to count: it reads them.
        return [self.usage]


def _stage(
    timer: Timer,
    model: str,
    kept: list[str],
    dropped: list[str],
    detail: str | None,
    not_in_answer: Sequence[str] = (),
    added: int = 0,
) -> DecompositionStage:
    notes = [detail] if detail else []
    if dropped:
        notes.append(f"dropped {len(dropped)} claim(s) about the sources themselves")
    if not_in_answer:
        notes.append(f"dropped {len(not_in_answer)} claim(s) the answer doesn't make")
    if added:
        notes.append(f"{added} sentence(s) of the answer no claim states, checked as claims themselves")
    return DecompositionStage(
        status="ok",
        ms=timer.ms,
        model=model,
        claim_count=len(kept),
        dropped=dropped,
        not_in_answer=list(not_in_answer),
        added=added,
        detail="; ".join(notes) or None,
    )


async def decompose(question: str, answer: str, decomposer: Decomposer) -> DecompositionOutcome:
    timer = Timer()
    result = await decomposer.decompose(question, answer)
    kept, dropped = split_claims(result.claims)
    return DecompositionOutcome(_stage(timer, result.usage.model, kept, dropped, None), kept, result.usage)


async def decompose_and_verify(
    question: str, answer: str, passages: Sequence[ScoredPassage], checker: DecomposeAndVerify
) -> DecompositionOutcome:
    """Claims and the model's verdicts from one call. Claims are cleaned as `decompose` cleans them, and
    each verdict stays with its claim; a claim the model gave no verdict for scores 0.

    The model's decomposition is held to its answer by numbers (claims.in_answer): a claim with a number the
    answer and question lack is dropped (it would refuse a right answer, or pass on a fact nobody is shown),
    and a sentence of the answer no claim states (a number no claim has, or most of its content words in no
    claim) is added as a claim of its own, judged by the local verifier alone (the model gave it no
    verdict), so nothing shown goes unchecked."""
    timer = Timer()
    result, verification = await checker.decompose_and_verify(question, answer, passages)
    kept: list[str] = []
    verdicts: list[ClaimVerdict] = []
    dropped: list[str] = []
    strays: list[str] = []
    for i, claim in enumerate(result.claims):
        clean, meta = split_claims([claim])
        dropped += meta
        if not clean or clean[0].casefold() in {k.casefold() for k in kept}:
            continue
        if not in_answer(clean[0], answer, question):
            strays.append(clean[0])
            continue
        kept.append(clean[0])
        verdicts.append(verification.verdicts[i] if i < len(verification.verdicts) else MISSING_VERDICT)
    model_claims = len(kept)
    added, _ = split_claims(
        s for s in uncovered_sentences(answer, kept) if s.casefold() not in {k.casefold() for k in kept}
    )
    claims = kept + added
    detail = f"claims and the model's entailment verdicts in one call ({checker.name})"
    stage = _stage(timer, result.usage.model, claims, dropped, detail, strays, len(added))
    given = Verification(verdicts=verdicts, usage=verification.usage, local_only_from=model_claims if added else None)
    return DecompositionOutcome(stage, claims, result.usage, given, checker.name)
