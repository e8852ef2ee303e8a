"""The gate: answer only when the mean claim score and the weakest claim both clear their thresholds."""

from __future__ import annotations

from collections.abc import Sequence

from provenance.models import ClaimResult, GroundednessStage
from provenance.timing import Timer


def gate(claims: Sequence[ClaimResult], threshold: float, min_claim_threshold: float) -> GroundednessStage:
    timer = Timer()
    if not claims:
        return GroundednessStage(
            status="ok",
            ms=timer.ms,
            score=0.0,
            min_claim=0.0,
            threshold=threshold,
            min_claim_threshold=min_claim_threshold,
            decision="fail",
            claims=[],
            detail="the answer made no checkable claim",
        )
    scores = [c.score for c in claims]
    # Decide on the figures the stage reports: unrounded, three claims of 0.7 average 0.6999999999999998.
    mean, lowest = round(sum(scores) / len(scores), 4), round(min(scores), 4)
    passed = mean >= threshold and lowest >= min_claim_threshold
    if passed:
        detail = None
    elif mean < threshold:
        detail = f"mean claim score {mean:.2f} is below {threshold:.2f}"
    else:
        detail = f"weakest claim scores {lowest:.2f}, below {min_claim_threshold:.2f}"
    return GroundednessStage(
        status="ok",
        ms=timer.ms,
        score=mean,
        min_claim=lowest,
        threshold=threshold,
        min_claim_threshold=min_claim_threshold,
        decision="pass" if passed else "fail",
        claims=list(claims),
        detail=detail,
    )
