"""`make llm-evals`' pieces that need no model: the report's counting and intervals, a resumed run's records,
and reading a GGUF header."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from evals.llm_report import figures, rate, raw_verdict, wilson
from provenance.evaluation.cases import Case
from provenance.evaluation.runner import json_record, resumed_results
from provenance.inference.llm_server import gguf_name
from tests.factories import case_result


def record(
    expect: str, status: str, candidate: str | None, right: bool | None = None, reason: str | None = None
) -> dict[str, object]:
    correct = right if status == "answered" else None
    return {"id": "c", "expect": expect, "status": status, "reason": reason, "candidate": candidate} | {
        "candidateRight": right,
        "answerCorrect": correct,
        "ms": 1000.0,
    }


def test_wilson_interval() -> None:
    lo, hi = wilson(9, 10)
    assert lo == pytest.approx(0.596, abs=0.001) and hi == pytest.approx(0.982, abs=0.001)
    assert wilson(0, 0) == (0.0, 1.0)
    assert rate(9, 10) == "9/10 = 90% [60–98%]"


def test_the_raw_model_and_the_gate_are_counted_apart() -> None:
    records = [
        record("answer", "answered", "$85 a month", right=True),  # right, passed
        record("answer", "refused", "$85 a month", right=True),  # right, refused
        record("answer", "refused", "$60 a month", right=False),  # wrong, caught
        record("refuse", "answered", "Dogs are welcome.", right=None),  # wrong, passed: a fabrication
        record("refuse", "refused", "", right=None),  # the model declined: not judged
        record("block", "blocked", None, right=None),  # screened before generation
        record("answer", "blocked", "$60 a month", right=False, reason="model_error"),  # no decision of the gate's
    ]
    assert raw_verdict(records[0]) == "right" and raw_verdict(records[3]) == "wrong" and raw_verdict(records[4]) is None
    f = figures(records)
    assert f["raw model wrong or unsupported, of its answers"].startswith("3/5 ")
    assert f["**gate catch rate**: wrong answers refused, of those it decided"].startswith("1/2 ")
    assert f["**right answers passed**, of those it decided"].startswith("1/2 ")
    assert f["fabrication at the gate (answered, expected refuse/block)"].startswith("1/3 ")
    assert f["false refusal (not answered, expected an answer)"].startswith("3/4 ")
    assert f["model_error (server or output failure)"].startswith("1/7 ")


def test_a_resumed_run_keeps_only_this_runs_whole_records(tmp_path: Path) -> None:
    cases = [
        Case(id="a", bucket="b", question="Q1?", expect="answer"),
        Case(id="b", bucket="b", question="Q2?", expect="refuse"),
    ]
    done = case_result(
        id="a",
        bucket="b",
        question="Q1?",
        answer="x",
        ms=12.0,
        must_include_any=["x"],
        answer_correct=True,
        candidate_answer="x",
    )
    other = json.dumps(json_record(done) | {"question": "another question"})
    path = tmp_path / "run.jsonl"
    path.write_text(json.dumps(json_record(done)) + "\n" + other + "\n" + '{"id": "b", "cut', encoding="utf-8")
    kept = resumed_results(path, cases)
    assert list(kept) == ["a"] and kept["a"] == done


def test_gguf_name_reads_the_header(tmp_path: Path) -> None:
    def string(s: str) -> bytes:
        return struct.pack("<Q", len(s)) + s.encode()

    header = b"GGUF" + struct.pack("<IQQ", 3, 0, 3)
    header += string("general.architecture") + struct.pack("<I", 8) + string("qwen2")
    header += string("general.alignment") + struct.pack("<I", 4) + struct.pack("<I", 32)
    header += string("general.name") + struct.pack("<I", 8) + string("Qwen2.5 Coder 1.5B Instruct GGUF")
    path = tmp_path / "m.gguf"
    path.write_bytes(header)
    assert gguf_name(path) == "Qwen2.5 Coder 1.5B Instruct GGUF"
    (tmp_path / "x.gguf").write_bytes(b"nope")
    assert gguf_name(tmp_path / "x.gguf") is None


def test_answers_are_judged_after_squad_normalisation_and_a_decline_in_words_is_no_answer() -> None:
    def case(candidate: str, must: list[str], expect: str = "answer") -> dict[str, object]:
        return record(expect, "answered", candidate) | {"mustIncludeAny": must, "bucket": "answerable"}

    assert raw_verdict(case("85 per month", ["$85"])) == "right"
    assert raw_verdict(case("It costs $0.05 per gram.", ["$0.05"])) == "right"
    assert raw_verdict(case("$60 a month", ["$85"])) == "wrong"
    # Words in a row: "12" is not "120", and "12" alone is not "12 spaces".
    assert raw_verdict(case("120 spaces", ["12 spaces"])) == "wrong"
    assert raw_verdict(case("12", ["12 spaces"])) == "wrong"
    assert raw_verdict(case("The passages do not mention the wifi password.", [], "refuse")) is None
    assert raw_verdict(case("No, there is no car parking at the makerspace.", [], "refuse")) == "wrong"


def test_the_chart_shows_what_the_gate_did_with_each_kind_of_answer() -> None:
    from evals.llm_report import chart_svg, gate_outcomes

    records = [
        record("answer", "answered", "$85 a month", right=True),
        record("answer", "refused", "$85 a month", right=True),
        record("refuse", "refused", "Dogs are welcome.", right=None),
        record("refuse", "answered", "Dogs are welcome.", right=None),
        record("refuse", "refused", "Cats are welcome.", right=None),
    ]
    assert gate_outcomes(records) == ((2, 1), (1, 1))
    svg = chart_svg([("ours", records)])
    assert svg.startswith("<svg") and "refused (caught) 2/3" in svg and "passed 1/2" in svg


def test_a_judged_run_is_set_beside_the_rules_on_the_cases_both_ran(tmp_path: Path) -> None:
    from evals.llm_report import render

    def one(case_id: str, status: str) -> dict[str, object]:
        return record("answer", status, "$85 a month", right=True) | {"id": case_id}

    rules = [one("a", "refused"), one("b", "answered")]
    judged = [one("a", "answered")]  # a part-run: only case a so far
    for name, records in (("ours.jsonl", rules), ("ours-judge.jsonl", judged)):
        (tmp_path / name).write_text("".join(json.dumps(r) + "\n" for r in records), encoding="utf-8")
    report = render(tmp_path)
    head = next(line for line in report.splitlines() if line.startswith("| figure | the model's claims"))
    assert "the model's claims, the 1 cases both ran" in head and "the sentences judged, the 1 cases both ran" in head
    passed = next(line for line in report.splitlines() if line.startswith("| **right answers passed**"))
    # all rules, all judged, rules on a, judged on a
    assert [c.strip().split(" ")[0] for c in passed.split("|")[2:6]] == ["1/2", "1/1", "0/1", "1/1"]


def test_the_judged_run_points_the_judge_at_the_same_server_and_keeps_its_own_records() -> None:
    from evals.llm_evals import SUITES, judge_env, records_name

    env = judge_env("http://127.0.0.1:9/v1")
    assert env["JUDGE"] == "openai" and env["JUDGE_BASE_URL"] == "http://127.0.0.1:9/v1" and env["JUDGE_MODEL"]
    # The judge's calls replace the writer's claims call.
    assert env["CLAIMS_FROM"] == "sentences"
    assert records_name(SUITES["ours"], judged=True) == "ours-judge" and records_name(SUITES["ours"], False) == "ours"
