"""Passages and claims the stage tests share."""

from __future__ import annotations

from collections.abc import Sequence

from provenance.ports import ScoredPassage
from provenance.wire import ClaimResult

LOCKERS = ScoredPassage(
    id="05-storage-and-lockers.md#lockers",
    source="05-storage-and-lockers.md",
    heading="Lockers",
    text="Lockers are rented by the month. A standard locker measures 30 cm by 45 cm by 90 cm and costs $14 per "
    "month. Keyholder membership includes one standard locker at no extra cost.",
    score=0.71,
)
SHELVES = ScoredPassage(
    id="05-storage-and-lockers.md#project-shelves",
    source="05-storage-and-lockers.md",
    heading="Project Shelves",
    text="A project shelf space is free of charge for up to 14 days. A floor steward may extend a project shelf "
    "booking once by 7 days.",
    score=0.52,
)
AGM = ScoredPassage(
    id="08-contacts-and-governance.md#annual-general-meeting",
    source="08-contacts-and-governance.md",
    heading="Annual General Meeting",
    text="The annual general meeting is held on Saturday 20 November 2027 at 2 pm in the main workshop.",
    score=0.44,
)
PASSAGES = [LOCKERS, SHELVES, AGM]


def claim(
    text: str, support: float, ids: Sequence[str] = (), relevance: float = 1.0, *, by_model: bool = False
) -> ClaimResult:
    """A claim whose relevance the local verifier judged, or (`by_model`) a model."""
    return ClaimResult(
        text=text,
        support=support,
        relevance=relevance,
        supporting_passage_ids=list(ids),
        lexical_overlap=0.0,
        local_support=support,
        local_relevance=None if by_model else relevance,
        model_relevance=relevance if by_model else None,
    )
