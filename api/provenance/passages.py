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
    pages: list[int] | None = None  # the pages of a paged source (PDF) it came from, in order
    # Its sentence units as [start, end) offsets into `text`, as ingest decided them (passage_sentences);
    # empty when none are stored (a passage built in a test, or text quarantine rewrote): then
    # `provenance.text.sentence_spans` decides them from the text, by the same rule.
    sentences: tuple[tuple[int, int], ...] = ()
