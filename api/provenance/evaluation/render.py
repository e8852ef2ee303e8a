"""The eval report: its Markdown tables and the SVG of the fabrication/false-refusal trade-off."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from provenance.evaluation.cases import CaseResult
from provenance.evaluation.scoring import (
    RELEVANCE_RULES,
    RELEVANCE_SOURCES,
    THRESHOLDS,
    Score,
    rescore,
    rescore_relevance,
    score,
)
from provenance.report import cell, pct, shown, table
from provenance.settings import GateSettings, Settings


def relevance_rules_table(results: Sequence[CaseResult], rules: GateSettings) -> list[str]:
    """Where a judge scored relevance: each source and gate rule, re-scored from the stored claim scores."""
    if not any(r.claim_judge_relevance is not None for r in results):
        return []
    lines = [
        "## Relevance: the judge's, the rules', or both",
        "",
        "Re-scored from the stored claim scores at the configured thresholds: each claim's relevance from the "
        "judge, from the rules, or from both, under the gate's two rules (`every`: the claims' mean and the "
        "weakest claim; `best`: the most relevant claim). The lexical caps stay, whichever source.",
        "",
    ]
    rows = []
    for source in RELEVANCE_SOURCES:
        for rule in RELEVANCE_RULES:
            s = score(rescore_relevance(results, rules, source, rule))
            rows.append(
                [
                    source,
                    rule,
                    pct(s.fabrication_rate),
                    pct(s.false_refusal_rate),
                    pct(s.accuracy),
                    pct(s.answered_correctly),
                ]
            )
    head = ("relevance from", "gate rule", "fabrication", "false refusal", "accuracy", "answered correctly")
    lines += table(head, "llrrrr", rows)
    return [*lines, ""]


# --- report ---------------------------------------------------------------------------------------


SCORE_HEAD = (
    "bucket",
    "N",
    "accuracy",
    "fabrication",
    "false refusal",
    "answer correct (of answered)",
    "answered correctly (of answerable)",
    "mean ms",
    "p95 ms",
)


def score_table(groups: dict[str, Sequence[CaseResult]]) -> list[str]:
    rows = []
    for name, rs in groups.items():
        s = score(rs)
        rates = (s.accuracy, s.fabrication_rate, s.false_refusal_rate, s.answer_correctness, s.answered_correctly)
        rows.append([name, s.n, *map(pct, rates), f"{s.mean_ms:.0f}", f"{s.p95_ms:.0f}"])
    return table(SCORE_HEAD, "lrrrrrrrr", rows)


def _rates(s: Score) -> list[str]:
    """The four rates a sweep's row shows."""
    return [pct(s.fabrication_rate), pct(s.false_refusal_rate), pct(s.accuracy), pct(s.answered_correctly)]


def tradeoff_svg(points: Sequence[tuple[float, float, float]], title: str, current: float) -> str:
    """Fabrication rate (y) against false-refusal rate (x), one labelled point per threshold; the
    configured threshold (`current`) in red."""
    w, h, pad = 560, 400, 60

    def x(v: float) -> float:
        return pad + v * (w - 2 * pad)

    def y(v: float) -> float:
        return h - pad - v * (h - 2 * pad)

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" '
        'font-family="sans-serif" font-size="12">',
        f'<rect width="{w}" height="{h}" fill="white"/>',
        f'<text x="{w / 2}" y="24" text-anchor="middle" font-size="15" font-weight="bold">{title}</text>',
        f'<line x1="{pad}" y1="{h - pad}" x2="{w - pad}" y2="{h - pad}" stroke="#333"/>',
        f'<line x1="{pad}" y1="{pad}" x2="{pad}" y2="{h - pad}" stroke="#333"/>',
        f'<text x="{w / 2}" y="{h - 18}" text-anchor="middle">false-refusal rate (answerable cases refused)</text>',
        f'<text x="18" y="{h / 2}" text-anchor="middle" transform="rotate(-90 18 {h / 2})">'
        "fabrication rate (answered when it should not)</text>",
    ]
    for t in (0.0, 0.25, 0.5, 0.75, 1.0):
        parts.append(f'<text x="{x(t)}" y="{h - pad + 16}" text-anchor="middle">{int(t * 100)}%</text>')
        parts.append(f'<text x="{pad - 8}" y="{y(t) + 4}" text-anchor="end">{int(t * 100)}%</text>')
        parts.append(f'<line x1="{x(t)}" y1="{pad}" x2="{x(t)}" y2="{h - pad}" stroke="#eee"/>')
        parts.append(f'<line x1="{pad}" y1="{y(t)}" x2="{w - pad}" y2="{y(t)}" stroke="#eee"/>')
    path = " ".join(f"{'M' if i == 0 else 'L'}{x(fr):.1f},{y(fab):.1f}" for i, (_, fr, fab) in enumerate(points))
    parts.append(f'<path d="{path}" fill="none" stroke="#2563eb" stroke-width="2"/>')
    for t, fr, fab in points:
        colour = "#dc2626" if abs(t - current) < 1e-9 else "#2563eb"
        parts.append(f'<circle cx="{x(fr):.1f}" cy="{y(fab):.1f}" r="4" fill="{colour}"/>')
        parts.append(f'<text x="{x(fr) + 6:.1f}" y="{y(fab) - 6:.1f}" fill="{colour}">{t:.2f}</text>')
    parts.append("</svg>")
    return "\n".join(parts)


def render_report(
    title: str,
    results: Sequence[CaseResult],
    k_sweep: dict[int, list[CaseResult]],
    settings: Settings,
    profile: str,
    plot_name: str,
    corpus: Path,
    cases_path: Path,
    elapsed_s: float,
) -> str:
    lines = [
        *_headline(title, results, settings, profile, corpus, cases_path, elapsed_s),
        *_threshold_sweep(results, settings),
        "",
        f"![fabrication against false refusal across thresholds]({plot_name})",
        "",
        *relevance_rules_table(results, settings.gate),
        *_k_sweep(k_sweep),
        *_failing(results),
    ]
    return "\n".join(lines) + "\n"


def _headline(
    title: str,
    results: Sequence[CaseResult],
    settings: Settings,
    profile: str,
    corpus: Path,
    cases_path: Path,
    elapsed_s: float,
) -> list[str]:
    """The title, what the run was, the headline figures and the scorecard by bucket."""
    buckets: dict[str, list[CaseResult]] = {}
    for r in results:
        buckets.setdefault(r.bucket, []).append(r)
    overall = score(results)
    return [
        f"# {title}",
        "",
        f"Profile `{profile}`, corpus `{shown(corpus)}`, cases `{shown(cases_path)}`, "
        f"k = {settings.retrieval.k}, "
        f"retrieval `{settings.retrieval.mode}`, gate: support mean ≥ {settings.gate.threshold:.2f} and weakest "
        f"claim ≥ {settings.gate.min_claim:.2f}, relevance of the most relevant claim ≥ "
        f"{settings.gate.relevance:.2f}. Generated by `provenance evals` in {elapsed_s:.0f} s; every figure below "
        "is what that run produced.",
        "",
        f"**Fabrication rate: {pct(overall.fabrication_rate)}** (answered when it should have refused or "
        f"blocked) · false refusals {pct(overall.false_refusal_rate)} · accuracy {pct(overall.accuracy)} · "
        f"answerable questions answered correctly {pct(overall.answered_correctly)} · a reference answer in "
        f"the {settings.retrieval.k} retrieved passages (recall@{settings.retrieval.k}) {pct(overall.recall)}",
        "",
        "## Scorecard",
        "",
        *score_table({**buckets, "overall": results}),
        "",
        "Accuracy counts the exact expected outcome (answered / refused / blocked). Answer correctness checks "
        "that an answer contains one of the case's `mustIncludeAny` strings.",
    ]


def _threshold_sweep(results: Sequence[CaseResult], settings: Settings) -> list[str]:
    return [
        "",
        "## Threshold sweep",
        "",
        "Re-scored from the stored claim scores (the gate is a pure function of them; cases that never reached "
        "the gate keep their outcome). The threshold is both the mean-support and the relevance threshold; the "
        f"weakest-claim threshold stays at {settings.gate.min_claim:.2f}.",
        "",
        *table(
            ("threshold", "fabrication", "false refusal", "accuracy", "answered correctly"),
            "rrrrr",
            ([f"{t:.2f}", *_rates(score(rescore(results, settings.gate, t)))] for t in THRESHOLDS),
        ),
    ]


def _k_sweep(k_sweep: dict[int, list[CaseResult]]) -> list[str]:
    return [
        "## k sweep",
        "",
        "Re-run end to end for each k (retrieval changes what every later stage sees, so nothing is re-scored).",
        "",
        *table(
            ("k", "fabrication", "false refusal", "accuracy", "answered correctly", "mean ms"),
            "rrrrrr",
            ([k, *_rates(s), f"{s.mean_ms:.0f}"] for k, s in ((k, score(rs)) for k, rs in sorted(k_sweep.items()))),
        ),
    ]


def _failing(results: Sequence[CaseResult]) -> list[str]:
    failing = [r for r in results if not r.correct or r.answer_correct is False]
    lines = ["", f"## Failing cases ({len(failing)})", ""]
    if not failing:
        return [*lines, "None."]
    head = ("id", "bucket", "expected", "got", "reason", "support (mean)", "weakest claim", "relevance", "question")
    rows = []
    for r in failing:
        got = r.status + (" (answer lacks the reference)" if r.correct and r.answer_correct is False else "")
        scores = (_two(r.groundedness), _two(r.min_claim), _two(r.relevance))
        rows.append([r.id, r.bucket, r.expect, got, r.reason or "", *scores, cell(r.question)])
    return lines + table(head, "lllllrrrl", rows)


def _two(x: float | None) -> str:
    return "" if x is None else f"{x:.2f}"
