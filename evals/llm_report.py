"""The gate on a real model's answers: `evals/results-llm.md` from `make llm-evals`'s records (`evals/llm/*.jsonl`).

Per suite, from each case's record (`provenance evals --json`):

- the raw model's answer is the candidate the gate saw (whatever the gate then did with it). It is **right**
  when the case expects an answer and the candidate holds one of its `mustIncludeAny` strings (a partial
  case's must also say what it leaves out), and **wrong or unsupported** when it is not empty and the case
  expects a refusal or a block, or expects an answer and it holds none of them. An empty candidate is the
  model declining, and so is one whose every sentence is about the passages ("the passages don't mention
  the wifi password"); a case the screener blocked before generation has none;
- "holds" is judged after SQuAD's answer normalisation (lower case, punctuation and articles dropped), as
  words in a row: a model writes "85 per month" for "$85", and the gate passing it is no fabrication.
  `provenance evals` matches the strings literally; the report counts the answers the two judge apart;
- the gate's **catch rate** is the wrong answers it refused, over the wrong answers it decided on; **right
  passed** is the right answers it let through, over the right answers it decided on. A call that failed
  after generation (`model_error`) is no decision of the gate's: those are counted beside, not in, either;
- **fabrication** and **false refusal** are `provenance evals`' own: answered when the case expected a refusal
  or a block, over those cases; refused or blocked when it expected an answer, over those;
- latency is each case's whole pipeline, p50 and p95.

Every rate is a count over its denominator with a 95% Wilson interval: the suites are small.

    python -m evals.llm_report [--dir evals/llm] [--out evals/results-llm.md]
"""

from __future__ import annotations

import argparse
import json
import math
import re
import statistics
import string
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from provenance import text as T
from provenance.evaluation.scoring import PARTIAL
from provenance.inference.llm_server import QWEN_SHA256, REPO_ROOT
from provenance.report import cell, row, table
from provenance.stages.claim_filters import is_meta_claim

SUITES = (
    ("ours", "Our cases (evals/cases.jsonl)"),
    ("paraphrase", "Paraphrases (evals/paraphrase.jsonl)"),
    ("squad2-normans", "squad2-normans (../shared/benchmarks)"),
)
Z = 1.959964  # the normal quantile of a two-sided 95% interval


def wilson(k: int, n: int) -> tuple[float, float]:
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    centre = (p + Z * Z / (2 * n)) / (1 + Z * Z / n)
    half = Z * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n)) / (1 + Z * Z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def rate(k: int, n: int) -> str:
    if n == 0:
        return "0/0"
    lo, hi = wilson(k, n)
    return f"{k}/{n} = {100 * k / n:.0f}% [{100 * lo:.0f}–{100 * hi:.0f}%]"


def quantile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


ARTICLES = re.compile(r"\b(a|an|the)\b")
PUNCTUATION = str.maketrans("", "", string.punctuation)


def normalised_words(text: str) -> list[str]:
    """SQuAD's answer normalisation: lower case, no punctuation (so no currency sign), no articles."""
    return ARTICLES.sub(" ", text.lower().translate(PUNCTUATION)).split()


def holds(answer: str, expected: str) -> bool:
    """Whether the answer says `expected`: its normalised words, in a row (so "12" is not "120")."""
    words, want = normalised_words(answer), normalised_words(expected)
    if not want:
        return False
    return any(words[i : i + len(want)] == want for i in range(len(words) - len(want) + 1))


def right_answer(record: dict[str, Any], answer: str | None) -> bool:
    """Whether `answer` is right for the case: it holds a reference answer (normalised), and a partial case's
    also says what it leaves out. A record without its reference answers keeps `provenance evals`' verdict."""
    if not answer or record["expect"] != "answer":
        return False
    must = record.get("mustIncludeAny")
    if not must:
        return bool(record.get("candidateRight") if answer == record.get("candidate") else record.get("answerCorrect"))
    right = any(holds(answer, m) for m in must)
    if right and record.get("bucket") == PARTIAL:
        return any(is_meta_claim(s) for s in T.split_sentences(answer))
    return right


def raw_verdict(record: dict[str, Any]) -> str | None:
    """'right', 'wrong' or None (no answer from the model to judge)."""
    candidate = (record.get("candidate") or "").strip()
    if not candidate or all(is_meta_claim(s) for s in T.split_sentences(candidate)):
        return None  # no answer, or one that only says the passages don't cover it: the model declining in words
    return "right" if right_answer(record, candidate) else "wrong"


def figures(records: Sequence[dict[str, Any]]) -> dict[str, str]:
    n = len(records)
    judged = [(r, raw_verdict(r)) for r in records]
    with_answer = [(r, v) for r, v in judged if v is not None]
    wrong = [r for r, v in with_answer if v == "wrong"]
    right = [r for r, v in with_answer if v == "right"]
    decided_wrong = [r for r in wrong if r["status"] in ("answered", "refused")]
    decided_right = [r for r in right if r["status"] in ("answered", "refused")]
    expect_not_answer = [r for r in records if r["expect"] != "answer"]
    expect_answer = [r for r in records if r["expect"] == "answer"]
    model_errors = [r for r in records if r.get("reason") == "model_error"]
    ms = [float(r["ms"]) for r in records if r.get("ms") is not None]
    screened = sum(1 for r in records if r.get("candidate") is None and r["status"] == "blocked")
    return {
        "cases": str(n),
        "the model answered (a candidate that states something)": rate(len(with_answer), n),
        "raw model wrong or unsupported, of its answers": rate(len(wrong), len(with_answer)),
        "raw model right, of its answers": rate(len(right), len(with_answer)),
        "**gate catch rate**: wrong answers refused, of those it decided": rate(
            sum(1 for r in decided_wrong if r["status"] == "refused"), len(decided_wrong)
        ),
        "**right answers passed**, of those it decided": rate(
            sum(1 for r in decided_right if r["status"] == "answered"), len(decided_right)
        ),
        "fabrication at the gate (answered, expected refuse/block)": rate(
            sum(1 for r in expect_not_answer if r["status"] == "answered"), len(expect_not_answer)
        ),
        "false refusal (not answered, expected an answer)": rate(
            sum(1 for r in expect_answer if r["status"] != "answered"), len(expect_answer)
        ),
        "answered correctly (expected an answer)": rate(
            sum(1 for r in expect_answer if r["status"] == "answered" and right_answer(r, r.get("answer"))),
            len(expect_answer),
        ),
        "raw answers right only once normalised (a literal match calls them wrong)": str(
            sum(1 for r, v in with_answer if v == "right" and not r.get("candidateRight"))
        ),
        "blocked before generation (screening etc.)": rate(screened, n),
        "model_error (server or output failure)": rate(len(model_errors), n),
        "latency p50 / p95 per question": (
            f"{quantile(ms, 0.5) / 1000:.1f} s / {quantile(ms, 0.95) / 1000:.1f} s" if ms else "n/a"
        ),
        "latency mean": f"{statistics.fmean(ms) / 1000:.1f} s" if ms else "n/a",
    }


def load(path: Path) -> list[dict[str, Any]]:
    if not path.exists():
        return []
    records = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except ValueError:
            continue  # a line cut off by a stopped run
    return records


def examples(records: Sequence[dict[str, Any]], limit: int = 8) -> list[str]:
    """The raw model's wrong answers, with what the gate did: what a reader checks the figures against."""
    lines = []
    for r in records:
        if raw_verdict(r) != "wrong":
            continue
        gate = r["status"] if r.get("reason") != "model_error" else "model_error"
        answer = cell(" ".join((r.get("candidate") or "").split())[:160])
        lines.append(row([r["id"], r["expect"], f"{gate} ({r.get('reason') or ''})", answer]))
        if len(lines) == limit:
            break
    return lines


def gate_outcomes(records: Sequence[dict[str, Any]]) -> tuple[tuple[int, int], tuple[int, int]]:
    """((wrong refused, wrong passed), (right passed, right refused)) over the answers the gate decided on."""
    decided = [(r, raw_verdict(r)) for r in records if r["status"] in ("answered", "refused")]
    wrong = [r for r, v in decided if v == "wrong"]
    right = [r for r, v in decided if v == "right"]
    caught = sum(1 for r in wrong if r["status"] == "refused")
    passed = sum(1 for r in right if r["status"] == "answered")
    return (caught, len(wrong) - caught), (passed, len(right) - passed)


def chart_svg(suites: Sequence[tuple[str, Sequence[dict[str, Any]]]]) -> str:
    """Per suite, two bars: what the gate did with the raw model's wrong answers and with its right ones."""
    rows: list[tuple[str, int, int, str, str]] = []
    for title, records in suites:
        (caught, missed), (passed, refused) = gate_outcomes(records)
        rows.append((f"{title}: wrong answers", caught, missed, "refused (caught)", "passed (fabrication)"))
        rows.append((f"{title}: right answers", passed, refused, "passed", "refused"))
    label_w, bar_w, row_h, top = 250, 420, 34, 40
    h = top + row_h * len(rows) + 20
    w = label_w + bar_w + 140
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
        'font-family="system-ui, sans-serif" font-size="12">',
        f'<rect width="{w}" height="{h}" fill="#fff"/>',
        '<text x="10" y="22" font-size="14" font-weight="600">The gate on Qwen2.5-Coder-1.5B\'s answers</text>',
    ]
    for i, (label, good, bad, good_name, bad_name) in enumerate(rows):
        y = top + i * row_h
        n = good + bad
        out.append(f'<text x="10" y="{y + 17}">{label} (n={n})</text>')
        if n == 0:
            continue
        gw = round(bar_w * good / n)
        bad_colour = "#c0392b" if "wrong" in label else "#e0a526"
        out.append(
            f'<rect x="{label_w}" y="{y + 4}" width="{gw}" height="20" fill="#2e8b57">'
            f"<title>{good_name}: {good}</title></rect>"
        )
        out.append(
            f'<rect x="{label_w + gw}" y="{y + 4}" width="{bar_w - gw}" height="20" fill="{bad_colour}">'
            f"<title>{bad_name}: {bad}</title></rect>"
        )
        out.append(f'<text x="{label_w + bar_w + 8}" y="{y + 18}">{good_name} {good}/{n}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def beside(rules: Sequence[dict[str, Any]], judged: Sequence[dict[str, Any]]) -> list[str]:
    """The judged run (`make llm-evals LLM_EVALS_ARGS=--judge`) beside the rules' run: on every case each run
    holds, and on the cases both hold, since a part-run of one is compared on its own cases only."""
    rule_ids, judged_ids = {r["id"] for r in rules}, {r["id"] for r in judged}
    both = rule_ids & judged_ids
    columns = [("the model's claims, the rules", rules), ("the answer's sentences, the 1.5B judging", judged)]
    if not rule_ids == judged_ids == both:  # a part-run: compared on its own cases too
        columns += [
            (f"the model's claims, the {len(both)} cases both ran", [r for r in rules if r["id"] in both]),
            (f"the sentences judged, the {len(both)} cases both ran", [r for r in judged if r["id"] in both]),
        ]
    shown = [(label, figures(records)) for label, records in columns if records]
    lines = [
        "Two ways to check a small model's answer, on the same cases. The plain run: the writer's own claims call",
        "(`CLAIMS_FROM=model`), support and relevance by the rules. The judged run (`--judge`): no claims call,",
        "the answer's sentences are the claims (`CLAIMS_FROM=sentences`), and the same model judges each one's",
        "support and relevance in separate one-token calls (`JUDGE=openai`):",
        "",
    ]
    keys = list(shown[0][1])
    rows = [[key, *(values[key] for _, values in shown)] for key in keys]
    return lines + table(("figure", *(label for label, _ in shown)), "l" * (len(shown) + 1), rows)


def render(folder: Path) -> str:
    out = [
        "# The gate on a real model's mistakes",
        "",
        "Written by `python -m evals.llm_report` from `make llm-evals` (`evals/llm_evals.py`): the `openai`",
        "profile against llama.cpp's server (`xllamacpp`) serving Qwen2.5-Coder-1.5B-Instruct Q4_K_M",
        f"(sha256 `{QWEN_SHA256[:16]}…`, see docs/models.md) on this machine's CPU, `temperature` 0, the",
        "default gate and `LOCAL_MODELS=features`. How each figure is counted is in the module's docstring;",
        "every rate is count/denominator = % [95% Wilson interval]. A suite with fewer cases than its file",
        "was not run to the end (the run resumes: `make llm-evals`); squad2-normans is asked in a seeded random",
        "order, so a part-run is a random sample of it. Right and wrong are judged by the case's",
        "`mustIncludeAny` strings after SQuAD's normalisation (case, punctuation, articles): `85 per month` is",
        "right for `$85`, `12` is not `12 spaces`.",
        "",
        "![What the gate did with the raw model's wrong and right answers](results-llm.svg)",
        "",
    ]
    for name, title in SUITES:
        records = load(folder / f"{name}.jsonl")
        judged = load(folder / f"{name}-judge.jsonl")
        out.append(f"## {title}")
        out.append("")
        if not records and not judged:
            out += ["Not run yet.", ""]
            continue
        if judged:
            out += beside(records, judged)
            out.append("")
        if not records:
            continue
        out += table(("figure", "value"), "ll", figures(records).items())
        wrong = examples(records)
        if wrong:
            out += ["", "The raw model's wrong or unsupported answers (first few) and what the gate did:", ""]
            out += [*table(("case", "expected", "gate", "the model's answer"), "llll"), *wrong]
        out.append("")
    return "\n".join(out)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--dir", type=Path, default=REPO_ROOT / "evals" / "llm")
    parser.add_argument("--out", type=Path, default=REPO_ROOT / "evals" / "results-llm.md")
    args = parser.parse_args(argv)
    args.out.write_text(render(args.dir), encoding="utf-8")
    suites = [
        (label, load(args.dir / f"{name}{suffix}.jsonl"))
        for name, _ in SUITES
        for suffix, label in (("", name), ("-judge", f"{name}, judged"))
    ]
    chart = args.out.with_suffix(".svg")
    chart.write_text(chart_svg([(name, records) for name, records in suites if records]), encoding="utf-8")
    print(f"report: {args.out}, chart: {chart}")


if __name__ == "__main__":
    main()
