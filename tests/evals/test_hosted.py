"""evals/hosted.py on a corpus, cases and scripts of its own (--corpus, --cases, --scripts): one case asked
four ways through the real `anthropic` SDK against the fake Messages API, over real Postgres, and the report
naming what it ran on."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import pytest

from evals import hosted
from provenance.report import shown

CORPUS_TEXT = """# Tiny workshop

## Day passes

A day pass costs $12 and is sold at the front desk.

## Opening hours

The workshop opens at 9 am on Saturdays.
"""
CASE = {
    "id": "tiny-01",
    "bucket": "answerable",
    "question": "How much does a day pass cost?",
    "expect": "answer",
    "mustIncludeAny": ["$12"],
}
PASSES = "tiny.md#day-passes"
HOURS = "tiny.md#opening-hours"
NOWHERE = "tiny.md#day-pass-desk"  # an id this corpus's reader never makes
SCRIPT = {
    "id": "tiny-01",
    "suite": "tiny",
    "faithful": {"answer": "A day pass is $12.", "claims": ["A day pass costs $12."], "passages": [PASSES]},
    "fabricated": {
        "kind": "shifted_number",
        "answer": "A day pass is $20.",
        "claims": ["A day pass costs $20."],
        "passages": [PASSES],
        "changed": "A day pass costs $12, not $20",
    },
    "offQuestion": {
        "answer": "Day passes are sold at the front desk.",
        "claims": ["Day passes are sold at the front desk."],
        "passages": [NOWHERE],
    },
}


def write_inputs(tmp_path: Path, script: Mapping[str, object]) -> tuple[Path, Path, Path]:
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "tiny.md").write_text(CORPUS_TEXT, encoding="utf-8")
    cases = tmp_path / "tiny-cases.jsonl"
    cases.write_text(json.dumps(CASE) + "\n", encoding="utf-8")
    scripts = tmp_path / "tiny-scripts.jsonl"
    scripts.write_text(json.dumps(script) + "\n", encoding="utf-8")
    return corpus, cases, scripts


def test_runs_on_the_corpus_cases_and_scripts_it_is_given(
    tmp_path: Path, pg_dsn: str, data_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DATABASE_URL", pg_dsn)
    monkeypatch.setenv("DATA_DIR", str(data_dir))
    monkeypatch.setenv("LOG_LEVEL", "warning")
    corpus, cases, scripts = write_inputs(tmp_path, SCRIPT)
    out, records = tmp_path / "hosted.md", tmp_path / "hosted.jsonl"
    argv = ["--corpus", str(corpus), "--cases", str(cases), "--scripts", str(scripts)]
    assert hosted.main([*argv, "--out", str(out), "--json", str(records)]) == 0

    got = {r["kind"]: r for r in map(json.loads, records.read_text(encoding="utf-8").splitlines())}
    assert list(got) == list(hosted.ALL_KINDS)
    assert {(r["id"], r["suite"], r["question"]) for r in got.values()} == {("tiny-01", "tiny", CASE["question"])}
    assert got["faithful"]["scriptedClaims"] == ["A day pass costs $12."]
    assert got["faithful"]["retrieved"] == [PASSES] and got["faithful"]["notInCorpus"] == []
    assert got["faithful"]["status"] == "answered"
    assert got["fabricated"]["status"] != "answered"
    assert got["off_honest"]["status"] != "answered"
    for kind in ("off_honest", "off_wrong"):
        # An id the corpus lacks is never in a prompt: the model cites the prompt's passages of that file.
        assert got[kind]["notInCorpus"] == [NOWHERE] and got[kind]["retrieved"] == []
        assert got[kind]["cited"] and set(got[kind]["cited"]) <= {PASSES, HOURS}

    report = out.read_text(encoding="utf-8")
    for path in (corpus, cases, scripts):
        assert f"`{shown(path)}`" in report
    assert "| (a) faithful · tiny | 1 | 1 (100.0%) |" in report
    assert "**1 scripted passage id(s) are not in this corpus**, named by 1 case(s)" in report
    assert f"| `{NOWHERE}` | tiny-01 |" in report
    assert "**outside this repository**" in report
    assert capsys.readouterr().out.startswith("(a) 1/1 answered; (b) 0/1 answered")


def test_scripts_for_cases_the_cases_file_lacks_are_an_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("LOG_LEVEL", "warning")
    corpus, cases, scripts = write_inputs(tmp_path, {**SCRIPT, "id": "tiny-99"})
    argv = ["--corpus", str(corpus), "--cases", str(cases), "--scripts", str(scripts), "--out", str(tmp_path / "o.md")]
    assert hosted.main(argv) == 2
    assert f"scripts for case ids that {shown(cases)} lack: tiny-99" in capsys.readouterr().err
    assert not (tmp_path / "o.md").exists()


def test_a_missing_corpus_or_file_is_named(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    corpus, cases, scripts = write_inputs(tmp_path, SCRIPT)
    for argv, named in [
        (["--corpus", str(tmp_path / "nowhere")], "--corpus: no such folder"),
        (["--cases", str(tmp_path / "none.jsonl")], "--cases: no such file"),
        (["--scripts", str(tmp_path / "none.jsonl")], "--scripts: no such file"),
    ]:
        with pytest.raises(SystemExit) as exit_:
            hosted.main(["--corpus", str(corpus), "--cases", str(cases), "--scripts", str(scripts), *argv])
        assert exit_.value.code == 2
        assert named in capsys.readouterr().err
