"""Citations come from the passages that verified claims rest on, never from what the generator says."""

from __future__ import annotations

from collections.abc import Sequence

from provenance.ports import ScoredPassage
from provenance.wire import Citation, ClaimResult


def citations_from_support(
    claims: Sequence[ClaimResult], passages: Sequence[ScoredPassage], min_claim_threshold: float
) -> list[Citation]:
    by_id = {p.id: p for p in passages}
    cited: list[Citation] = []
    seen: set[str] = set()
    for claim in claims:
        if claim.support < min_claim_threshold:
            continue
        for pid in claim.supporting_passage_ids:
            if pid in by_id and pid not in seen:
                seen.add(pid)
                passage = by_id[pid]
                cited.append(
                    Citation(passage_id=pid, source=passage.source, heading=passage.heading, pages=passage.pages)
                )
    return cited
