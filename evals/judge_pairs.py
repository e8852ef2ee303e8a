"""The reading judge on labelled support pairs: fit its calibration on one set, report on another.

    .venv/bin/python -m evals.judge_pairs --base-url http://127.0.0.1:8765/v1 --model NAME --fit
    .venv/bin/python -m evals.judge_pairs --serve-local --fit      # serves Qwen2.5-Coder-1.5B itself

Fit: `evals/support-pairs.jsonl` over `corpus/` (Platt scaling of the judge's P(Yes), written into
`api/provenance/data/judge_calibration.json` for this model). Report: `evals/support-pairs-18f.jsonl` over the
18F handbook, written before anything was fitted, never fitted on. Each pair's claim is read, as at run
time, against the passages of its source file: the rules score every one (the best counts), and the judge
reads the rules' best `--candidates` passages, each cut to the window of one or two sentences the rules
found the claim in (the best counts). Reported, for the rules alone, the judge
alone and the judge under the rules' vetoes: ROC AUC, and how many restatements and how many changed claims
reach the gate's 0.70. Also the lexical overlap the lexical stage caps at, over the restatements: the
threshold they pass.

Judgments are kept in `evals/judge/<model>.jsonl` (claim, passage id, P(Yes)): a run that stopped resumes.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections import Counter
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from scipy.optimize import minimize

from provenance import text as T
from provenance.claims.features import load_coefficients
from provenance.claims.judge import client_for
from provenance.claims.judge.calibration import JudgeCalibration, save_calibration
from provenance.claims.judge.model import ModelJudge
from provenance.claims.support import RuleSupport
from provenance.claims.vectors import SentenceEmbeddings, WordVectors
from provenance.claims.verdict import FINAL_VETOES, window_of
from provenance.inference.embedder import get_embedder
from provenance.ingest.chunking import chunk_document
from provenance.ingest.folder import read_sources
from provenance.ports import PassageSupport, ScoredPassage
from provenance.report import table
from provenance.settings import Settings
from provenance.stages.lexical import MIN_OVERLAP

ROOT = Path(__file__).resolve().parent.parent
FIT = (ROOT / "evals" / "support-pairs.jsonl", ROOT / "corpus")
REPORT = (ROOT / "evals" / "support-pairs-18f.jsonl", ROOT.parent / "shared" / "corpora" / "18f-handbook" / "pages")
CACHE = ROOT / "evals" / "judge"
PASS = 0.70
# The raw P(Yes) past which the next candidate passage is not read (the run time's ENOUGH is calibrated).
ENOUGH_RAW = 0.9
HELD_OUT = "Held out: evals/support-pairs-18f.jsonl (18F handbook; never fitted on)"


def load_pairs(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def passages_by_source(folder: Path, sources: set[str]) -> dict[str, list[ScoredPassage]]:
    files, _ = read_sources(folder)
    out: dict[str, list[ScoredPassage]] = {}
    for f in files:
        if f.name not in sources:
            continue
        out[f.name] = [
            ScoredPassage(id=c.id, source=f.name, heading=c.heading, text=c.text, score=0.0)
            for c in chunk_document(f.name, f.text, lambda t: len(t.split()), 256)
        ]
    return out


def auc(scores: Sequence[float], labels: Sequence[int]) -> float:
    pos = [s for s, y in zip(scores, labels, strict=True) if y]
    neg = [s for s, y in zip(scores, labels, strict=True) if not y]
    if not pos or not neg:
        return float("nan")
    wins = sum((p > n) + 0.5 * (p == n) for p in pos for n in neg)
    return wins / (len(pos) * len(neg))


class Cache:
    def __init__(self, model: str) -> None:
        CACHE.mkdir(parents=True, exist_ok=True)
        self.path = CACHE / f"{model.replace('/', '_')}.jsonl"
        self.seen: dict[tuple[str, str], float] = {}
        if self.path.is_file():
            for line in self.path.read_text(encoding="utf-8").splitlines():
                row = json.loads(line)
                self.seen[(row["claim"], row["passage"])] = row["pYes"]

    def put(self, claim: str, passage: str, p: float) -> None:
        self.seen[(claim, passage)] = p
        with self.path.open("a", encoding="utf-8") as f:
            f.write(json.dumps({"claim": claim, "passage": passage, "pYes": p}) + "\n")


class Scored:
    def __init__(self, rules: PassageSupport, judged: list[tuple[PassageSupport, float]], overlap: float) -> None:
        self.rules = rules
        self.judged = judged
        self.overlap = overlap


async def score_pairs(
    pairs: list[dict[str, object]], folder: Path, rules: RuleSupport, judge: ModelJudge, cache: Cache
) -> list[Scored]:
    by_source = passages_by_source(folder, {str(p["source"]) for p in pairs})
    missing = sorted({str(p["source"]) for p in pairs} - set(by_source))
    if missing:
        raise SystemExit(f"sources not found under {folder}: {missing}")
    rules.set_corpus([(p.text, p.sentences or ()) for ps in by_source.values() for p in ps])
    out = []
    for n, pair in enumerate(pairs):
        claim = str(pair["claim"])
        passages = by_source[str(pair["source"])]
        scored = sorted(rules.check([claim], passages)[0], key=lambda s: -s.score)
        judged = []
        for candidate in scored[: judge.candidates]:
            # As at run time: the window of the passage the rules read the claim against.
            passage = window_of(next(p for p in passages if p.id == candidate.passage_id), candidate)
            key = (claim, f"{candidate.passage_id}@{candidate.start}-{candidate.end}")
            if key not in cache.seen:
                cache.put(claim, key[1], (await judge.support(claim, passage)).p_yes)
            judged.append((candidate, cache.seen[key]))
            if candidate.quoted or cache.seen[key] >= ENOUGH_RAW:
                # As at run time: a passage that states the claim ends the search.
                break
        terms = T.content_terms(claim)
        overlap = max(T.overlap(terms, T.content_terms(p.text) | T.content_terms(p.heading)) for p in passages)
        out.append(Scored(scored[0], judged, overlap))
        print(f"\r  {n + 1}/{len(pairs)} pairs", end="", file=sys.stderr, flush=True)
    print(file=sys.stderr)
    return out


def judge_alone(s: Scored, judge: ModelJudge) -> float:
    return max(judge.calibrated(p) for _, p in s.judged) if s.judged else 0.0


def judge_vetoed(s: Scored, judge: ModelJudge) -> float:
    best = 0.0
    for candidate, p in s.judged:
        score = 1.0 if candidate.quoted else judge.calibrated(p)
        cap = FINAL_VETOES.get(candidate.veto or "")
        best = max(best, score if cap is None else min(score, cap))
    # The lexical stage's cap, whoever judged.
    return min(best, 0.2) if s.overlap < MIN_OVERLAP else best


def raw_judge(s: Scored) -> float:
    return max((p for _, p in s.judged), default=0.0)


def fit_platt(raw: Sequence[float], labels: Sequence[int]) -> tuple[float, float]:
    p = np.clip(np.asarray(raw), 1e-4, 1 - 1e-4)
    x = np.log(p / (1 - p))
    y = np.asarray(labels, dtype=float)

    def loss(theta: np.ndarray) -> float:
        z = theta[0] * x + theta[1]
        q = 1.0 / (1.0 + np.exp(-np.clip(z, -50, 50)))
        return float(-np.mean(y * np.log(q + 1e-9) + (1 - y) * np.log(1 - q + 1e-9)))

    result = minimize(loss, np.asarray([1.0, 0.0]), method="Nelder-Mead")
    return float(result.x[0]), float(result.x[1])


def pairs_table(name: str, pairs: list[dict[str, object]], scored: list[Scored], judge: ModelJudge) -> list[str]:
    labels = [int(str(p["label"])) for p in pairs]
    columns = {
        "rules alone": [s.rules.score for s in scored],
        "judge alone": [judge_alone(s, judge) for s in scored],
        "judge + vetoes": [judge_vetoed(s, judge) for s in scored],
    }
    pos, neg = labels.count(1), labels.count(0)
    lines = [
        f"### {name}: {len(pairs)} pairs ({pos} restatements, {neg} changed claims)",
        "",
    ]
    rows = []
    for label, scores in columns.items():
        passed_pos = sum(1 for s, y in zip(scores, labels, strict=True) if y and s >= PASS)
        passed_neg = sum(1 for s, y in zip(scores, labels, strict=True) if not y and s >= PASS)
        reached = (f"{passed_pos}/{pos} ({passed_pos / pos:.0%})", f"{passed_neg}/{neg} ({passed_neg / neg:.0%})")
        rows.append([label, f"{auc(scores, labels):.3f}", *reached])
    head = ("", "ROC AUC", "restatements reaching 0.70", "changed claims reaching 0.70")
    lines += table(head, "llll", rows)
    by_kind: Counter[str] = Counter()
    passed: Counter[str] = Counter()
    vetoed = [judge_vetoed(s, judge) for s in scored]
    for pair, score in zip(pairs, vetoed, strict=True):
        kind = f"{'+' if int(str(pair['label'])) else '-'} {pair['kind']}"
        by_kind[kind] += 1
        passed[kind] += score >= PASS
    lines += ["", "Judge + vetoes, by kind: " + ", ".join(f"{k} {passed[k]}/{by_kind[k]}" for k in sorted(by_kind))]
    overlaps = sorted(s.overlap for s, y in zip(scored, labels, strict=True) if y)
    below = sum(1 for o in overlaps if o < MIN_OVERLAP)
    lines += [
        f"Lexical overlap of the restatements with their passages: min {overlaps[0]:.2f}, 5th percentile "
        f"{overlaps[len(overlaps) // 20]:.2f}, median {overlaps[len(overlaps) // 2]:.2f}; "
        f"{below}/{len(overlaps)} below MIN_OVERLAP ({MIN_OVERLAP}).",
        "",
    ]
    return lines


async def run(args: argparse.Namespace, base_url: str, model: str) -> int:
    settings = Settings()
    # A measurement, not a request: a slow judgment on a busy machine is waited for.
    settings = settings.with_overrides(
        judge_base_url=base_url, judge_model=model, judge_candidates=args.candidates, judge_timeout_s=600
    )
    judge = ModelJudge(
        client_for(settings, base_url), model, server=base_url, calibration=None, candidates=args.candidates
    )
    embedder = get_embedder(settings.embedding.model, settings.data_dir)
    coef = load_coefficients()
    cache = Cache(model)
    fit_pairs, report_pairs = load_pairs(FIT[0]), load_pairs(REPORT[0])
    rules = RuleSupport(SentenceEmbeddings(embedder), WordVectors(embedder), coef.support)
    print("fit pairs (evals/support-pairs.jsonl over corpus/)", file=sys.stderr)
    fit_scored = await score_pairs(fit_pairs, FIT[1], rules, judge, cache)
    fit_labels = [int(str(p["label"])) for p in fit_pairs]
    fit_raw = [raw_judge(s) for s in fit_scored]
    a, b = fit_platt(fit_raw, fit_labels)
    calibration = JudgeCalibration(
        model=model,
        a=round(a, 4),
        b=round(b, 4),
        fitted_on="evals/support-pairs.jsonl (Platt scaling of P(Yes), evals/judge_pairs.py)",
        pairs=len(fit_pairs),
        auc=round(auc(fit_raw, fit_labels), 4),
    )
    if args.fit:
        save_calibration(calibration)
        print(f"wrote the calibration for {model}: a={a:.4f} b={b:.4f}", file=sys.stderr)
    judge.calibration = calibration
    rules = RuleSupport(SentenceEmbeddings(embedder), WordVectors(embedder), coef.support)
    print("report pairs (evals/support-pairs-18f.jsonl over the 18F handbook)", file=sys.stderr)
    report_scored = await score_pairs(report_pairs, REPORT[1], rules, judge, cache)
    lines = [
        f"## The reading judge on support pairs: `{model}`",
        "",
        f"Calibration fitted on evals/support-pairs.jsonl: a = {a:.4f}, b = {b:.4f} (raw P(Yes) AUC there "
        f"{calibration.auc:.3f}). Each claim read against the window of the rules' best {args.candidates} passages "
        "of its source file; the gate's 0.70.",
        "",
        *pairs_table(
            "Held out: evals/support-pairs-18f.jsonl (18F handbook; never fitted on)",
            report_pairs,
            report_scored,
            judge,
        ),
        *pairs_table("Fitted on: evals/support-pairs.jsonl (corpus/)", fit_pairs, fit_scored, judge),
    ]
    text = "\n".join(lines)
    print(text)
    if args.out:
        args.out.write_text(text + "\n", encoding="utf-8")
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--base-url")
    parser.add_argument("--model")
    parser.add_argument("--serve-local", action="store_true", help="assemble and serve Qwen2.5-Coder-1.5B here")
    parser.add_argument("--fit", action="store_true", help="write the calibration for this model")
    parser.add_argument("--candidates", type=int, default=2)
    parser.add_argument("--out", type=Path, default=ROOT / "evals" / "results-judge-pairs.md")
    args = parser.parse_args()
    if args.serve_local:
        from provenance.inference.llm_server import QWEN_FILE, assemble_qwen, serving

        with serving(assemble_qwen(), log=ROOT / ".data" / "judge-pairs-server.log") as server:
            return asyncio.run(run(args, server.base_url, Path(QWEN_FILE).stem))
    if not args.base_url or not args.model:
        parser.error("give --base-url and --model, or --serve-local")
    return asyncio.run(run(args, args.base_url, args.model))


if __name__ == "__main__":
    raise SystemExit(main())
