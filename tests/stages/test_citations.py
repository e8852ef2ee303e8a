"""Citations (stages/citations.py) come from the verified support only."""

from __future__ import annotations

from provenance.stages.citations import citations_from_support
from tests.stages.support import AGM, LOCKERS, PASSAGES, SHELVES, claim


def test_citations_from_verified_support_only() -> None:
    claims = [
        claim("a", 0.9, [LOCKERS.id, "99-not-retrieved.md#x", SHELVES.id]),
        claim("b", 0.39, [AGM.id]),  # below the min-claim threshold: contributes nothing
        claim("c", 0.4, [SHELVES.id, LOCKERS.id]),  # at the threshold: counts, but both already cited
    ]
    cites = citations_from_support(claims, PASSAGES, 0.4)
    assert [c.passage_id for c in cites] == [LOCKERS.id, SHELVES.id]
    assert (cites[0].source, cites[0].heading) == (LOCKERS.source, LOCKERS.heading)


def test_citations_at_threshold_and_order() -> None:
    claims = [claim("a", 0.4, [AGM.id]), claim("b", 0.8, [SHELVES.id, AGM.id])]
    assert [c.passage_id for c in citations_from_support(claims, PASSAGES, 0.4)] == [AGM.id, SHELVES.id]
    assert citations_from_support(claims, PASSAGES, 0.9) == []
    assert citations_from_support([], PASSAGES, 0.4) == []
