"""The fusion bench's arithmetic (bench/fusion_sweep.py) and the SQuAD suite it is held out on
(bench/squad_suite.py), on hand-made rankings and a hand-made articles file. No database here: the statement's
own fusion is held to the same arithmetic in tests/store/test_hybrid_search.py."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.fusion_sweep import Question, Ranked, found, rrf, weighted
from bench.squad_suite import write_suite


def ranked(vector: list[tuple[str, float]], text: list[tuple[str, float]]) -> Ranked:
    return Ranked(Question("q", "?"), vector, text)


def test_weighted_fusion_keeps_a_first_place_that_rank_fusion_loses() -> None:
    # b holds the text ranking's head by id alone: a, b and c share one text rank.
    r = ranked([("a", 0.8), ("b", 0.5), ("x", 0.4)], [("b", 1.0), ("c", 1.0), ("a", 1.0)])
    assert rrf(r, constant=10, pool=20)[0] == "b"  # 1/12 + 1/11 against a's 1/11 + 1/13
    assert weighted(r, weight=0.7, pool=20)[0] == "a"  # 0.7 + 0.3 against 0.7 * 0.625 + 0.3
    # The pool cuts both rankings: beyond it a passage counts for nothing in that ranking.
    assert weighted(r, weight=0.7, pool=1) == ["a", "b"]


def test_found_by_reference_string_or_by_gold_passage() -> None:
    # Case and line breaks aside, as `provenance evals` scores recall@k.
    texts = {"p1": "Lockers cost $14\nper Month.", "p2": "Nothing here."}
    by_string = Question("q", "?", must_include_any=["$14 per month"])
    assert found(by_string, ["p2", "p1"], texts) and not found(by_string, ["p2"], texts)
    by_id = Question("q", "?", passages=["p2"])
    assert found(by_id, ["p1", "p2"], texts) and not found(by_id, ["p1"], texts)


def test_squad_suite_writes_one_section_per_paragraph_and_only_answerable_questions(tmp_path: Path) -> None:
    rows = [
        {"title": "Foo_Bar", "id": "1", "question": "Q1?", "context": "First paragraph.", "answers": ["First"]},
        {
            "title": "Foo_Bar",
            "id": "2",
            "question": "Q2?",
            "context": "First paragraph.",
            "answers": [" First ", "First"],
        },
        {
            "title": "Foo_Bar",
            "id": "3",
            "question": "Q3?",
            "context": "Second one.",
            "answers": [],
            "is_impossible": True,
        },
        {"title": "Other", "id": "4", "question": "Q4?", "context": "Elsewhere.", "answers": ["Elsewhere"]},
    ]
    source = tmp_path / "articles.jsonl"
    source.write_text("\n".join(json.dumps(r) for r in rows))
    assert write_suite(source, tmp_path / "suite", ["Foo_Bar"]) == (2, 2)
    markdown = (tmp_path / "suite" / "corpus" / "foo_bar.md").read_text()
    assert markdown.startswith("# Foo Bar\n") and "## Foo Bar, part 1\n\nFirst paragraph." in markdown
    assert "## Foo Bar, part 2\n\nSecond one." in markdown and "Elsewhere" not in markdown
    cases = [json.loads(line) for line in (tmp_path / "suite" / "cases.jsonl").read_text().splitlines()]
    assert [(c["id"], c["mustIncludeAny"], c["expect"]) for c in cases] == [
        ("1", ["First"], "answer"),
        ("2", ["First"], "answer"),
    ]
    with pytest.raises(SystemExit, match="no article 'Missing'"):
        write_suite(source, tmp_path / "other", ["Missing"])
