"""Fit the local support check's logistic model and write it into api/provenance/data/local_verifier.json.

    .venv/bin/python -m evals.calibrate_support          # report the committed model on the pairs
    .venv/bin/python -m evals.calibrate_support --fit    # fit by log-loss, write, and report

Training data: `evals/support-pairs.jsonl`, hand-written restatements of handbook sentences (positives) and
claims with one fact wrong (negatives: a swapped value, a flipped rule, a shifted date, an added clause, a
wrong subject), each scored, as at run time, against every passage of `corpus/` (the best passage counts).
Never the eval cases, `evals/hosted-scripts.jsonl` or `../shared/benchmarks`.

What ships is set by hand from this report (see `support_source` in the JSON): a log-loss fit weighs a
refused restatement like an accepted fabrication, and on these pairs, once the vetoes have decided most
negatives, it comes out nearly flat (every unvetoed claim near 0.7). The support features are picked per
passage by the model itself (the best window of sentences), so the fit
is repeated a few times, each round choosing windows with the previous round's model. Weights are
constrained to the direction that can't reward a changed fact: coverage and similarity up, added words
down. The report gives, per kind, how many pairs reach 0.70 after the vetoes, on a held-out fifth and on all.
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from collections import Counter
from pathlib import Path

import numpy as np
from scipy.optimize import minimize

from provenance.claims.features import COEFFICIENTS_PATH, SUPPORT_FEATURES, load_coefficients
from provenance.claims.rules import LogisticModel
from provenance.claims.support import RuleSupport
from provenance.claims.vectors import SentenceEmbeddings, WordVectors
from provenance.inference.embedder import get_embedder
from provenance.ingest.chunking import chunk_document
from provenance.ingest.folder import read_sources
from provenance.ports import ScoredPassage, SupportFeatures
from provenance.settings import Settings

ROOT = Path(__file__).resolve().parent.parent
PAIRS = ROOT / "evals" / "support-pairs.jsonl"
CORPUS = ROOT / "corpus"
SEED = 20261201
ROUNDS = 3
PASS = 0.70
# +1: the feature may only raise support; -1: only lower it.
DIRECTIONS = {"coverage": 1.0, "added": -1.0, "similarity": 1.0}


def corpus_passages() -> list[ScoredPassage]:
    files, _ = read_sources(CORPUS)
    out = []
    for f in files:
        for c in chunk_document(f.name, f.text, lambda t: len(t.split()), 256):
            out.append(ScoredPassage(id=c.id, source=f.name, heading=c.heading, text=c.text, score=0.0))
    return out


def fit(X: np.ndarray, y: np.ndarray, l2: float = 0.5) -> tuple[np.ndarray, float]:
    """Logistic regression whose weights keep the sign `DIRECTIONS` gives each feature."""
    signs = np.asarray([DIRECTIONS[name] for name in SUPPORT_FEATURES])
    Xs = X * signs

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        w, b = theta[:-1], theta[-1]
        z = Xs @ w + b
        p = 1.0 / (1.0 + np.exp(-np.clip(z, -50, 50)))
        eps = 1e-9
        value = -np.mean(y * np.log(p + eps) + (1 - y) * np.log(1 - p + eps)) + l2 * float(w @ w) / len(y)
        grad_z = (p - y) / len(y)
        grad = np.append(Xs.T @ grad_z + 2 * l2 * w / len(y), grad_z.sum())
        return float(value), grad

    bounds = [(0.0, None)] * X.shape[1] + [(None, None)]
    result = minimize(loss, np.zeros(X.shape[1] + 1), jac=True, bounds=bounds, method="L-BFGS-B")
    return result.x[:-1] * signs, float(result.x[-1])


def check_all(
    rules: RuleSupport, pairs: list[dict[str, object]], passages: list[ScoredPassage]
) -> list[tuple[float, SupportFeatures | None, str | None]]:
    out = []
    for n, pair in enumerate(pairs):
        scored = rules.check([str(pair["claim"])], passages)[0]
        best = max(scored, key=lambda s: s.score)
        out.append((best.score, best.features, best.veto))
        if n % 50 == 0:
            print(f"  {n}/{len(pairs)}", file=sys.stderr)
    return out


def report(pairs: list[dict[str, object]], scores: list[float], rows: list[int]) -> list[str]:
    lines = []
    by_kind: Counter[str] = Counter()
    passed: Counter[str] = Counter()
    for i in rows:
        kind = f"{'+' if pair_label(pairs[i]) else '-'} {pairs[i]['kind']}"
        by_kind[kind] += 1
        passed[kind] += scores[i] >= PASS
    for kind in sorted(by_kind):
        lines.append(f"  {kind:22s} {passed[kind]:3d} / {by_kind[kind]:3d} reach {PASS:.2f}")
    return lines


def pair_label(pair: dict[str, object]) -> int:
    label = pair["label"]
    assert isinstance(label, int)
    return label


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fit", action="store_true", help="fit by log-loss and write the model (see the docstring)")
    args = parser.parse_args()
    pairs = [json.loads(line) for line in PAIRS.read_text(encoding="utf-8").splitlines() if line.strip()]
    passages = corpus_passages()
    settings = Settings()
    embedder = get_embedder(settings.embedding.model, settings.data_dir)
    coef = load_coefficients()
    sentences = SentenceEmbeddings(embedder)
    rules = RuleSupport(sentences, WordVectors(embedder), coef.support)
    rules.set_corpus([(p.text, p.sentences or ()) for p in passages])
    y = np.asarray([pair_label(p) for p in pairs], dtype=float)
    order = list(range(len(pairs)))
    random.Random(SEED).shuffle(order)
    held_out = sorted(order[: len(order) // 5])
    train = sorted(order[len(order) // 5 :])
    model = coef.support
    for round_ in range(ROUNDS if args.fit else 0):
        print(f"round {round_ + 1}: choosing windows with {model.weights} {model.intercept}", file=sys.stderr)
        judged = check_all(rules, pairs, passages)
        # Vetoed pairs are decided by the veto; the model learns from the rest.
        usable = [i for i in train if judged[i][1] is not None and judged[i][2] is None]
        X = np.asarray([[getattr(judged[i][1], f) for f in SUPPORT_FEATURES] for i in usable])
        weights, intercept = fit(X, y[usable])
        model = LogisticModel(
            features=list(SUPPORT_FEATURES),
            weights=[round(float(w), 4) for w in weights],
            intercept=round(intercept, 4),
        )
        rules.model = model
    final = check_all(rules, pairs, passages)
    scores = [s for s, _, _ in final]
    lines = [f"support model {model.features} {model.weights} {model.intercept}"]
    lines += ["held-out fifth:", *report(pairs, scores, held_out), "all pairs:", *report(pairs, scores, order)]
    print("\n".join(lines))
    if args.fit:
        data = json.loads(COEFFICIENTS_PATH.read_text(encoding="utf-8"))
        data["support"] = {"features": model.features, "weights": model.weights, "intercept": model.intercept}
        data["support_source"] = (
            f"evals/calibrate_support.py: a sign-constrained logistic regression on {len(train)} of the "
            f"{len(pairs)} hand-written pairs of evals/support-pairs.jsonl (seed {SEED}, {ROUNDS} rounds)"
        )
        COEFFICIENTS_PATH.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        print(f"wrote {COEFFICIENTS_PATH}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
