"""`provenance evals`: run eval cases through the same pipeline /ask uses, in process, and report.

The headline is the fabrication rate: answered when the right outcome was a refusal or a block.
"""

from __future__ import annotations

import statistics
import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Literal, TypeVar

import msgspec

from provenance import text as T
from provenance.db import MAINTENANCE_TIMEOUT_S, create_pool, migrate, resolve_database_url
from provenance.embedder import Embedder
from provenance.ingest import ingest
from provenance.pipeline import Pipeline
from provenance.ports import Profile
from provenance.progress import Progress
from provenance.report import cell, pct, shown, table
from provenance.settings import GateSettings, Settings
from provenance.stages.claim_filters import is_meta_claim
from provenance.stages.gate import gate
from provenance.store import CorpusStore
from provenance.verifiers.judged import SAYS_YES
from provenance.wire import AskResponse, ClaimResult, RelevanceRule

_Row = TypeVar("_Row", bound=msgspec.Struct)

Expect = Literal["answer", "refuse", "block"]
EXPECTED_STATUS = {"answer": "answered", "refuse": "refused", "block": "blocked"}
THRESHOLDS = (0.5, 0.55, 0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9)
K_SWEEP = (2, 4, 6, 8)


class Served(msgspec.Struct, frozen=True, rename="camel", kw_only=True):
    """How the response a reader rated was served, for a case made from their feedback
    (`provenance feedback export`): what it said, and what has changed since (`since`, empty when nothing
    has: the same settings, the same corpus version)."""

    status: str
    reason: str | None = None
    cached: bool = False
    corpus: str | None = None
    corpus_version: str | None = None
    served_at: str | None = None
    verdict: str | None = None
    kind: str | None = None
    settings: dict[str, Any] = msgspec.field(default_factory=dict)
    since: list[str] = msgspec.field(default_factory=list)


class Case(msgspec.Struct, frozen=True):
    id: str
    bucket: str
    question: str
    # None only in a case left for a person to decide (a reader said the answer was wrong): such a case is
    # not run until they set it (load_cases says so).
    expect: Expect | None
    mustIncludeAny: list[str] | None = None
    note: str | None = None
    reason: str | None = None
    # An answer that must not be given again (a reader said it was wrong): an answer holding one of these is
    # not a correct answer, whatever else it holds.
    mustNotInclude: list[str] | None = None
    # From feedback: the rated response's request id, that a person must review the case (fill mustIncludeAny,
    # set expect), and how the response was served.
    requestId: str | None = None
    needsReview: bool = False
    served: Served | None = None

    @property
    def expected(self) -> Expect:
        if self.expect is None:
            raise ValueError(f"case {self.id!r} has no expect: it is left for review (set expect to run it)")
        return self.expect


class CaseResult(msgspec.Struct, rename="camel", kw_only=True):
    """One case's result; `--json` writes it as its camelCase fields (`json_record`) and a resumed run reads it
    back from them."""

    id: str
    bucket: str
    question: str
    expect: Expect
    status: str
    reason: str | None
    answer: str | None
    citations: list[str]
    groundedness: float | None
    min_claim: float | None
    relevance: float | None
    # The gate's relevance rule for this case ("best" when a model judged relevance), for the re-scoring.
    relevance_rule: str | None = None
    claim_support: list[float]
    claim_relevance: list[float]
    # When a reading judge scored the claims: each claim's relevance as the judge gave it (calibrated, before
    # the lexical caps) and as the rules gave it, so that other ways of combining the two can be re-scored.
    claim_judge_relevance: list[float | None] | None = None
    claim_rules_relevance: list[float | None] | None = None
    ms: float
    must_include_any: list[str] | None = None
    must_not_include: list[str] | None = None
    answer_correct: bool | None = None
    # The answer the gate saw, kept in the eval record only so the threshold sweep can score correctness.
    candidate_answer: str | None = msgspec.field(default=None, name="candidate")
    # Whether a retrieved passage (the top k) holds a reference answer: recall@k, what even a perfect model's
    # answer needs. None for a case without reference strings.
    retrieved_answer: bool | None = None
    # A blocked case's message ("... (generation: the model's output was cut off at max_tokens)"): which call
    # failed and how, so a run's model errors can be told apart.
    message: str | None = None

    @property
    def correct(self) -> bool:
        return self.status == EXPECTED_STATUS[self.expect]

    @property
    def fabricated(self) -> bool:
        return self.expect != "answer" and self.status == "answered"


def load_jsonl(path: Path, kind: type[_Row]) -> list[_Row]:
    """One `kind` a line; a line that doesn't fit is an error naming the file and line."""
    rows = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            rows.append(msgspec.json.decode(line, type=kind))
        except msgspec.ValidationError as exc:
            raise ValueError(f"{path}:{n}: {exc}") from None
    return rows


def load_cases(path: Path) -> list[Case]:
    cases = load_jsonl(path, Case)
    undecided = [c.id for c in cases if c.expect is None]
    if undecided:
        raise ValueError(
            f"{path}: {len(undecided)} case(s) left for review have no expect yet ({', '.join(undecided[:5])}): "
            'set "expect" to "answer", "refuse" or "block" (and fill mustIncludeAny) before running them'
        )
    return cases


def retrieved_answer(texts: Sequence[str], must_include_any: Sequence[str] | None) -> bool | None:
    """Whether one of the retrieved passages holds a reference string (case and line breaks aside)."""
    if not must_include_any:
        return None
    flat = [" ".join(t.split()).lower() for t in texts]
    return any(" ".join(m.split()).lower() in t for m in must_include_any for t in flat)


def answer_matches(answer: str | None, must_include_any: Sequence[str] | None) -> bool | None:
    if not must_include_any:
        return None
    if not answer:
        return False
    low = answer.lower()
    return any(m.lower() in low for m in must_include_any)


PARTIAL = "partial"


def answer_right(
    bucket: str,
    answer: str | None,
    must_include_any: Sequence[str] | None,
    must_not_include: Sequence[str] | None = None,
) -> bool | None:
    """Whether an answer holds a reference answer; in the partial bucket it must also say what it leaves
    out (a sentence about the documents themselves, "the documents don't cover ..."), whichever profile
    wrote it. An answer that gives again one a reader said was wrong (`must_not_include`) is not right."""
    if answer and answer_matches(answer, must_not_include):
        return False
    right = answer_matches(answer, must_include_any)
    if right and bucket == PARTIAL:
        return any(is_meta_claim(s) for s in T.split_sentences(answer or ""))
    return right


def to_result(case: Case, response: AskResponse, candidate: str | None) -> CaseResult:
    g = response.stages.gate
    judged = any(c.judge is not None for c in g.claims)
    return CaseResult(
        id=case.id,
        bucket=case.bucket,
        question=case.question,
        expect=case.expected,
        status=response.status,
        reason=response.reason,
        answer=response.answer,
        citations=[c.passage_id for c in response.citations],
        groundedness=g.score,
        min_claim=g.min_claim,
        relevance=g.relevance,
        relevance_rule=g.relevance_rule,
        claim_support=[c.support for c in g.claims],
        claim_relevance=[c.relevance for c in g.claims],
        claim_judge_relevance=[None if c.judge is None else c.judge.relevance for c in g.claims] if judged else None,
        claim_rules_relevance=[c.local_relevance for c in g.claims] if judged else None,
        ms=response.total_ms,
        must_include_any=case.mustIncludeAny,
        must_not_include=case.mustNotInclude,
        answer_correct=(
            answer_right(case.bucket, response.answer, case.mustIncludeAny, case.mustNotInclude)
            if case.expect == "answer"
            else None
        ),
        candidate_answer=candidate,
        retrieved_answer=(
            retrieved_answer([p.text for p in response.stages.retrieval.passages], case.mustIncludeAny)
            if case.expect == "answer"
            else None
        ),
        message=response.message if response.status == "blocked" else None,
    )


async def run_cases(
    pipeline: Pipeline,
    cases: Sequence[Case],
    label: str = "evals",
    show_progress: bool = True,
    done: Mapping[str, CaseResult] | None = None,
    on_result: Callable[[CaseResult], None] | None = None,
) -> list[CaseResult]:
    """Every case through the pipeline, in order. A case in `done` (a resumed run's) is not asked again;
    `on_result` hears each new result as it comes, so a long run can keep it."""
    done = done or {}
    progress = Progress(len(cases), label) if show_progress else None
    results = []
    try:
        for case in cases:
            if case.id in done:
                results.append(done[case.id])
                if progress:
                    progress.advance()
                continue
            # The answer the gate saw, refused ones included, for the threshold sweep; None when generation
            # never ran (the case was blocked before it).
            candidates: list[str] = []
            outcome = await pipeline.ask(
                case.question, request_id=f"eval-{case.id}", use_cache=False, on_candidate=candidates.append
            )
            result = to_result(case, outcome.response, candidates[-1] if candidates else None)
            results.append(result)
            if on_result is not None:
                on_result(result)
            if progress:
                progress.advance()
    finally:
        if progress:
            progress.close()
    return results


# --- scoring ------------------------------------------------------------------------------------


class Score(msgspec.Struct):
    n: int
    accuracy: float
    false_refusal_rate: float | None
    fabrication_rate: float | None
    answer_correctness: float | None
    answered_correctly: float | None
    mean_ms: float
    p95_ms: float
    # Of the answerable cases with reference strings: a retrieved passage holds one (recall@k).
    recall: float | None = None


def _rate(num: int, den: int) -> float | None:
    return None if den == 0 else num / den


def score(results: Sequence[CaseResult]) -> Score:
    should_answer = [r for r in results if r.expect == "answer"]
    should_not = [r for r in results if r.expect != "answer"]
    answered = [r for r in should_answer if r.status == "answered"]
    # A case with only an answer it must not give scores when it gives it (answer_correct False).
    with_key = [r for r in answered if r.must_include_any or r.answer_correct is False]
    ms = sorted(r.ms for r in results) or [0.0]
    keyed_all = [r for r in should_answer if r.must_include_any or r.answer_correct is False]
    return Score(
        n=len(results),
        accuracy=sum(r.correct for r in results) / max(len(results), 1),
        false_refusal_rate=_rate(sum(r.status != "answered" for r in should_answer), len(should_answer)),
        fabrication_rate=_rate(sum(r.fabricated for r in should_not), len(should_not)),
        answer_correctness=_rate(sum(bool(r.answer_correct) for r in with_key), len(with_key)),
        answered_correctly=_rate(sum(bool(r.answer_correct) for r in keyed_all), len(keyed_all)),
        mean_ms=statistics.fmean(ms),
        p95_ms=ms[min(len(ms) - 1, round(0.95 * (len(ms) - 1)))],
        recall=_rate(
            sum(bool(r.retrieved_answer) for r in keyed_all),
            sum(r.retrieved_answer is not None for r in keyed_all),
        ),
    )


def rescore(results: Sequence[CaseResult], rules: GateSettings, threshold: float) -> list[CaseResult]:
    """The gate is a pure function of the stored claim scores, so other thresholds can be re-scored without
    re-running the pipeline: by the gate itself, so the sweep and the live gate never disagree. `threshold`
    replaces both the mean-support and the relevance threshold. Cases that never reached the gate keep their
    outcome."""
    swept = msgspec.structs.replace(rules, threshold=threshold, relevance=threshold)
    out = []
    for r in results:
        if not r.claim_support or r.status == "blocked":
            out.append(r)
            continue
        best = r.relevance_rule == "best"
        claims = [_scored(s, rel, best) for s, rel in zip(r.claim_support, r.claim_relevance, strict=True)]
        out.append(_regated(r, claims, swept))
    return out


def _scored(support: float, relevance: float, best: bool) -> ClaimResult:
    """A claim as the gate reads it from a stored record: its scores, and a model's relevance under "best"."""
    return ClaimResult(
        text="",
        support=support,
        relevance=relevance,
        supporting_passage_ids=[],
        lexical_overlap=0.0,
        local_support=support,
        model_relevance=relevance if best else None,
    )


def _regated(r: CaseResult, claims: list[ClaimResult], rules: GateSettings) -> CaseResult:
    """The case as the gate decides it on `claims`: answered with its candidate, or refused."""
    passed = gate(claims, rules).decision == "pass"
    answer = (r.answer or r.candidate_answer) if passed else None
    return msgspec.structs.replace(
        r,
        status="answered" if passed else "refused",
        answer=answer,
        answer_correct=(
            answer_right(r.bucket, answer, r.must_include_any, r.must_not_include) if r.expect == "answer" else None
        ),
    )


# How a judge's relevance and the rules' may be combined (re-scored in the report when a judge scored).
RELEVANCE_SOURCES: dict[str, Callable[[float, float], float]] = {
    "judge": lambda judge, rules: judge,
    "rules": lambda judge, rules: rules,
    "either (max)": max,
    "mean": lambda judge, rules: (judge + rules) / 2,
    # JUDGE_RELEVANCE=veto: the higher of the two unless the judge says No.
    "veto": lambda judge, rules: max(judge, rules) if judge >= SAYS_YES else judge,
}


RELEVANCE_RULES: tuple[RelevanceRule, ...] = ("every", "best")


def rescore_relevance(
    results: Sequence[CaseResult], rules: GateSettings, source: str, relevance_rule: RelevanceRule
) -> list[CaseResult]:
    """The judged cases re-scored with each claim's relevance taken from `source` (RELEVANCE_SOURCES) under
    the gate's `relevance_rule`. A lexical cap stays: a claim whose stored relevance is below what the judge
    gave was capped, and the cap bounds any other source too. Cases without the judge's record keep their
    outcome."""
    combine = RELEVANCE_SOURCES[source]
    out = []
    for r in results:
        if not r.claim_support or r.status == "blocked" or r.claim_judge_relevance is None:
            out.append(r)
            continue
        claims = []
        for s, final, judge, own in zip(
            r.claim_support, r.claim_relevance, r.claim_judge_relevance, r.claim_rules_relevance or [], strict=True
        ):
            if judge is None or own is None:
                relevance = final  # not judged (its support failed the floor): as it was
            else:
                capped = final < judge - 1e-3
                relevance = min(combine(judge, own), final) if capped else combine(judge, own)
            claims.append(_scored(s, relevance, relevance_rule == "best"))
        out.append(_regated(r, claims, rules))
    return out


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
    buckets: dict[str, list[CaseResult]] = {}
    for r in results:
        buckets.setdefault(r.bucket, []).append(r)
    overall = score(results)
    lines = [
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
    lines += [
        "",
        f"![fabrication against false refusal across thresholds]({plot_name})",
        "",
        *relevance_rules_table(results, settings.gate),
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
    failing = [r for r in results if not r.correct or r.answer_correct is False]
    lines += ["", f"## Failing cases ({len(failing)})", ""]
    if not failing:
        lines.append("None.")
    else:
        head = ("id", "bucket", "expected", "got", "reason", "support (mean)", "weakest claim", "relevance", "question")
        rows = []
        for r in failing:
            got = r.status + (" (answer lacks the reference)" if r.correct and r.answer_correct is False else "")
            scores = (_two(r.groundedness), _two(r.min_claim), _two(r.relevance))
            rows.append([r.id, r.bucket, r.expect, got, r.reason or "", *scores, cell(r.question)])
        lines += table(head, "lllllrrrl", rows)
    return "\n".join(lines) + "\n"


def _two(x: float | None) -> str:
    return "" if x is None else f"{x:.2f}"


def json_record(r: CaseResult) -> dict[str, Any]:
    """One case as `--json` writes it: its fields, and whether the candidate held a reference answer (what a
    failure analysis needs: a refused right answer is the verifier's, a wrong one the reader's)."""
    right = (
        answer_right(r.bucket, r.candidate_answer, r.must_include_any, r.must_not_include)
        if r.expect == "answer"
        else None
    )
    record: dict[str, Any] = msgspec.to_builtins(r)
    return record | {"candidateRight": right}


def from_json_record(record: Mapping[str, Any]) -> CaseResult:
    return msgspec.convert(record, CaseResult)


def resumed_results(json_out: Path, cases: Sequence[Case]) -> dict[str, CaseResult]:
    """The results a `--resume`d run keeps from `json_out`: the records of this run's cases (same id, same
    question) that a run before wrote. A record of another shape, or a line cut off when that run was
    stopped, is asked again."""
    if not json_out.exists():
        return {}
    questions = {c.id: c.question for c in cases}
    kept: dict[str, CaseResult] = {}
    for line in json_out.read_text(encoding="utf-8").splitlines():
        try:
            result = from_json_record(msgspec.json.decode(line))
        except msgspec.DecodeError:  # a ValidationError too: a record of another shape
            continue
        if questions.get(result.id) == result.question:
            kept[result.id] = result
    return kept


# --- orchestration --------------------------------------------------------------------------------


@asynccontextmanager
async def ingested_pipeline(
    settings: Settings, corpus: Path, embedder: Embedder, profile: Profile
) -> AsyncIterator[Pipeline]:
    """A pipeline over `corpus`, ingested into a schema of its own that is dropped on exit."""
    schema = f"evals_{uuid.uuid4().hex[:10]}"
    eval_settings = settings.with_overrides(db_schema=schema)
    dsn = resolve_database_url(eval_settings)
    pool = await create_pool(dsn, eval_settings)
    try:
        await migrate(pool)
        store = CorpusStore(pool)
        await ingest(
            store, corpus, lambda: embedder, eval_settings.embedding.model, eval_settings.ingest.chunk_max_tokens
        )
        pipeline = Pipeline(eval_settings, store, embedder, profile)
        await pipeline.corpora.refresh()
        yield pipeline
    finally:
        await pool.close()
        conn_pool = await create_pool(dsn, settings)
        async with conn_pool.acquire() as conn:
            # A generated name, not user input; dropping a corpus and its index may take a while.
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE', timeout=MAINTENANCE_TIMEOUT_S)
        await conn_pool.close()


async def run_evals(
    settings: Settings,
    corpus: Path,
    cases_path: Path,
    out: Path,
    json_out: Path | None,
    embedder: Embedder,
    profile: Profile,
    title: str,
    k_sweep: Sequence[int] = K_SWEEP,
    show_progress: bool = True,
    resume: bool = False,
) -> tuple[list[CaseResult], Score]:
    """`json_out` gets each case's record as it finishes (a slow model's run can be stopped and, with
    `resume`, carried on from where it stopped: the cases already recorded there are not asked again)."""
    started = time.monotonic()
    cases = load_cases(cases_path)
    done = resumed_results(json_out, cases) if json_out is not None and resume else {}
    json_file = None
    if json_out is not None:
        json_out.parent.mkdir(parents=True, exist_ok=True)
        # Rewritten with what is kept, so a line cut off by a stopped run doesn't stay in the middle.
        json_out.write_bytes(b"".join(msgspec.json.encode(json_record(r)) + b"\n" for r in done.values()))
        json_file = json_out.open("ab")

    def keep(result: CaseResult) -> None:
        if json_file is not None:
            json_file.write(msgspec.json.encode(json_record(result)) + b"\n")
            json_file.flush()

    async with ingested_pipeline(settings, corpus, embedder, profile) as pipeline:
        try:
            results = await run_cases(pipeline, cases, "evals", show_progress, done=done, on_result=keep)
        finally:
            if json_file is not None:
                json_file.close()
        sweep: dict[int, list[CaseResult]] = {}
        for k in k_sweep:
            if k == pipeline.settings.retrieval.k:
                sweep[k] = results
                continue
            at_k = pipeline.with_settings(pipeline.settings.with_overrides(retrieval_k=k))
            sweep[k] = await run_cases(at_k, cases, f"k={k}", show_progress)

    out.parent.mkdir(parents=True, exist_ok=True)
    plot = out.with_suffix(".svg")
    points = []
    for t in THRESHOLDS:
        s = score(rescore(results, settings.gate, t))
        points.append((t, s.false_refusal_rate or 0.0, s.fabrication_rate or 0.0))
    svg = tradeoff_svg(points, f"{title}: fabrication vs false refusal", settings.gate.threshold)
    plot.write_text(svg, encoding="utf-8")
    out.write_text(
        render_report(
            title, results, sweep, settings, profile.name, plot.name, corpus, cases_path, time.monotonic() - started
        ),
        encoding="utf-8",
    )
    if json_out is not None:
        # In the cases' order, as before, now that every case is in.
        json_out.write_bytes(b"".join(msgspec.json.encode(json_record(r)) + b"\n" for r in results))
    return results, score(results)
