"""The passage as retrieval hands it to every later stage: what the pipeline, the profiles and the
verifiers read. It has no SQL in it; the data-access module builds it from rows."""

from __future__ import annotations

import msgspec


class ScoredPassage(msgspec.Struct, frozen=True):
    id: str
    source: str
    heading: str
    text: str
    score: float
