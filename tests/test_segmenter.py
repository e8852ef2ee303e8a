"""The segmenter (pysbd, through provenance.text) on the cases the hand rule it replaced got wrong, on the
English Golden Rules and on the 18F handbook's abbreviations (bench/data; `python -m bench.segmenter`
writes the scores beside the old rule's to docs/segmenter.md)."""

from __future__ import annotations

import json

from bench.segmenter import DATA, old_rule, score, segmenter
from provenance import text as T


def test_abbreviations_do_not_end_sentences() -> None:
    assert T.split_sentences("The U.S. General Services Administration runs TTS. It is in D.C.") == [
        "The U.S. General Services Administration runs TTS.",
        "It is in D.C.",
    ]
    assert T.split_sentences(
        "Leave at 4:30 p.m. if you came at 8 a.m. and took a 30-minute lunch (e.g., at noon)."
    ) == ["Leave at 4:30 p.m. if you came at 8 a.m. and took a 30-minute lunch (e.g., at noon)."]
    assert old_rule("The U.S. General Services Administration runs TTS.") != [
        "The U.S. General Services Administration runs TTS."
    ]


def test_scores_on_the_golden_rules_and_the_18f_abbreviations() -> None:
    golden = json.loads((DATA / "golden_rules_en.json").read_text(encoding="utf-8"))
    abbrev = json.loads((DATA / "abbreviations_18f.json").read_text(encoding="utf-8"))
    new_golden, _ = score(segmenter, golden, markers=False)
    new_abbrev, _ = score(segmenter, abbrev, markers=False)
    old_golden, _ = score(old_rule, golden)
    old_abbrev, _ = score(old_rule, abbrev)
    assert (new_golden, new_abbrev) >= (45, 19)  # 46/48 and 19/20 when measured
    assert new_golden > old_golden and new_abbrev > old_abbrev  # 27/48 and 13/20


def test_spans_are_offsets_into_the_text_without_list_markers() -> None:
    text = "• Dental: $12*\n• Vision plans, e.g. EyeMed. Ask HR.\n\n    code one\n    code two"
    spans = T.sentence_spans(text)
    assert [text[a:b] for a, b in spans] == [
        "Dental: $12*",
        "Vision plans, e.g. EyeMed.",
        "Ask HR.",
        "code one\n    code two",
    ]
    assert T.SEGMENTER_VERSION.startswith("pysbd-")
