"""What kind of answer each question asks for, and which questions a change to the rule reads differently.

`claims.answer_types.expected_answer_type` decides whether a question asks for an amount, a time, a date, a count, a
person, an address...; the lexical stage caps a claim that doesn't give a checkable kind (`wrong_answer_type`),
and the local verifier and generator read it too. A change to it is checked by reading every question whose
kind it changes, over many more questions than the suites: ours, the paraphrases, the 18F suite,
squad2-normans, the conversations' turns and the SQuAD training articles (about 16,000).

    .venv/bin/python -m evals.answer_types                      # how many questions of each kind, per set
    .venv/bin/python -m evals.answer_types --against HEAD~1     # the questions whose kind differs from HEAD~1's
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path

from provenance.claims.answer_types import expected_answer_type

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
CASES = [
    ROOT / "evals" / "cases.jsonl",
    ROOT / "evals" / "paraphrase.jsonl",
    ROOT / "evals" / "18f-handbook.jsonl",
    SHARED / "benchmarks" / "squad2-normans" / "cases.jsonl",
]
CONVERSATIONS = [ROOT / "evals" / "conversations.jsonl", ROOT / "evals" / "conversations-heldout.jsonl"]
TRAINING = SHARED / "training"

Kind = Callable[[str], str | None]


def questions_of(path: Path) -> list[str]:
    """The questions of a JSON-lines file: a case's `question`, a conversation's turns (each as asked and as
    its standalone question), a SQuAD article's `qas`."""
    out: list[str] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.strip():
            continue
        row = json.loads(line)
        if isinstance(row.get("question"), str):
            out.append(row["question"])
        for turn in row.get("turns", []):
            out += [turn[k] for k in ("question", "standalone") if isinstance(turn.get(k), str)]
        for paragraph in row.get("paragraphs", []):
            out += [qa["question"] for qa in paragraph.get("qas", []) if isinstance(qa.get("question"), str)]
    return out


def question_sets() -> dict[str, list[str]]:
    paths = [*CASES, *CONVERSATIONS, *sorted(TRAINING.glob("*.jsonl"))]
    return {str(p.relative_to(p.parent.parent)): questions_of(p) for p in paths if p.exists()}


def changes(questions: Iterable[str], old: Kind, new: Kind) -> list[tuple[str, str | None, str | None]]:
    """Each distinct question whose kind differs, with its kind before and after."""
    return [(q, old(q), new(q)) for q in sorted(set(questions)) if old(q) != new(q)]


# Where the rule lived: its own module since it was split from claims/rules.py.
MODULES = ("api/provenance/claims/answer_types.py", "api/provenance/claims/rules.py")


def kind_at(revision: str, repo: Path = ROOT) -> Kind:
    """`expected_answer_type` as it was at a git revision (its module alone, imported from a copy)."""
    for module_path in MODULES:
        shown = subprocess.run(
            ["git", "show", f"{revision}:{module_path}"], cwd=repo, capture_output=True, text=True, check=False
        )
        if shown.returncode == 0:
            source = shown.stdout
            break
    else:
        raise SystemExit(f"no answer-type rule at {revision}: none of {', '.join(MODULES)}")
    path = Path(tempfile.mkdtemp()) / "rules_then.py"
    path.write_text(source, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("rules_then", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    kind: Kind = module.expected_answer_type
    return kind


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--against", help="a git revision: list the questions whose kind differs from its rule's")
    args = parser.parse_args(argv)
    sets = question_sets()
    if args.against is None:
        for name, questions in sets.items():
            counts = Counter(expected_answer_type(q) or "none" for q in set(questions))
            print(f"{name}: {len(set(questions))} questions, " + ", ".join(f"{k} {n}" for k, n in counts.most_common()))
        return 0
    old = kind_at(args.against)
    every = {q for questions in sets.values() for q in questions}
    changed = changes(every, old, expected_answer_type)
    for question, before, after in changed:
        where = next(name for name, questions in sets.items() if question in questions)
        print(f"{where} | {question} | {before} -> {after}")
    moves = Counter(f"{before} -> {after}" for _, before, after in changed)
    summary = ", ".join(f"{k} {n}" for k, n in moves.most_common())
    print(f"{len(changed)} of {len(every)} questions change kind: {summary}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
