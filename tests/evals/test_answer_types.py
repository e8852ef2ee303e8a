"""evals/answer_types.py: which questions it reads, and which a changed rule reads differently."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from evals.answer_types import changes, kind_at, questions_of
from provenance.claims.answer_types import expected_answer_type


def test_questions_are_read_from_cases_conversations_and_squad_rows(tmp_path: Path) -> None:
    rows = [
        {"id": "a", "question": "How much is a day pass?"},
        {"id": "c", "turns": [{"question": "And on Sunday?", "standalone": "When is it open on Sunday?"}, {}]},
        {"id": "s", "question": "Who led the troops?", "context": "..."},
    ]
    path = tmp_path / "set.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n\n", encoding="utf-8")
    assert questions_of(path) == [
        "How much is a day pass?",
        "And on Sunday?",
        "When is it open on Sunday?",
        "Who led the troops?",
    ]


def test_changes_lists_each_distinct_question_read_differently() -> None:
    def old(q: str) -> str | None:
        return "money" if "pay" in q or "fee" in q else None

    asked = ["How many hours each pay period?", "How many hours each pay period?", "What is the fee?"]
    assert changes(asked, old, expected_answer_type) == [("How many hours each pay period?", "money", "number")]
    assert changes(asked, expected_answer_type, expected_answer_type) == []


def test_the_rule_at_a_revision_is_that_revision_s(tmp_path: Path) -> None:
    claims = tmp_path / "api" / "provenance" / "claims"
    claims.mkdir(parents=True)

    def commit(module: str, body: str) -> str:
        (claims / module).write_text(f"def expected_answer_type(question):\n    return {body}\n", encoding="utf-8")
        git("add", ".")
        git("commit", "-q", "-m", body)
        return git("rev-parse", "HEAD").strip()

    def git(*args: str) -> str:
        env = os.environ | {
            "GIT_AUTHOR_NAME": "t",
            "GIT_AUTHOR_EMAIL": "t@x",
            "GIT_COMMITTER_NAME": "t",
            "GIT_COMMITTER_EMAIL": "t@x",
        }
        return subprocess.run(["git", *args], cwd=tmp_path, check=True, capture_output=True, text=True, env=env).stdout

    git("init", "-q")
    # The rule in claims/rules.py first, then in a module of its own (claims/answer_types.py).
    first = commit("rules.py", "'money' if 'pay' in question else None")
    commit("answer_types.py", "None")
    assert kind_at(first, tmp_path)("How many hours each pay period?") == "money"
    assert kind_at("HEAD", tmp_path)("How many hours each pay period?") is None
