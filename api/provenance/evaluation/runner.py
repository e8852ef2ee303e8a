"""`provenance evals`: run eval cases through the same pipeline /ask uses, in process, and report.

The headline is the fabrication rate: answered when the right outcome was a refusal or a block."""

from __future__ import annotations

import time
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import msgspec

from provenance.evaluation.cases import Case, CaseResult, load_cases
from provenance.evaluation.claim_features import claim_records, feature_verifier
from provenance.evaluation.render import render_report, tradeoff_svg
from provenance.evaluation.scoring import THRESHOLDS, Score, answer_right, rescore, retrieved_answer, score
from provenance.inference.embedder import Embedder
from provenance.ingest.folder import ingest
from provenance.pipeline.door import Pipeline
from provenance.ports import Profile
from provenance.report import ProgressBar
from provenance.settings import Settings
from provenance.store.corpora import CorpusStore
from provenance.store.pool import MAINTENANCE_TIMEOUT_S, create_pool, migrate, resolve_database_url
from provenance.wire import AskResponse

K_SWEEP = (2, 4, 6, 8)


def to_result(
    case: Case, response: AskResponse, candidate: str | None, claims: list[dict[str, Any]] | None = None
) -> CaseResult:
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
        claim_local_relevance=[c.local_relevance for c in g.claims] if judged else None,
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
        claims=claims,
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
    progress = ProgressBar(len(cases), label) if show_progress else None
    features = feature_verifier(pipeline.profile.verifier)
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
            response = outcome.response
            claims = None if features is None else claim_records(features, case.question, response)
            result = to_result(case, response, candidates[-1] if candidates else None, claims)
            results.append(result)
            if on_result is not None:
                on_result(result)
            if progress:
                progress.advance()
    finally:
        if progress:
            progress.close()
    return results


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

    _write_report(title, results, sweep, settings, profile.name, out, corpus, cases_path, time.monotonic() - started)
    if json_out is not None:
        # In the cases' order, as before, now that every case is in.
        json_out.write_bytes(b"".join(msgspec.json.encode(json_record(r)) + b"\n" for r in results))
    return results, score(results)


def _write_report(
    title: str,
    results: list[CaseResult],
    sweep: dict[int, list[CaseResult]],
    settings: Settings,
    profile: str,
    out: Path,
    corpus: Path,
    cases_path: Path,
    elapsed_s: float,
) -> None:
    """The report at `out` and its trade-off plot beside it (the same name, .svg)."""
    out.parent.mkdir(parents=True, exist_ok=True)
    plot = out.with_suffix(".svg")
    points = []
    for t in THRESHOLDS:
        s = score(rescore(results, settings.gate, t))
        points.append((t, s.false_refusal_rate or 0.0, s.fabrication_rate or 0.0))
    svg = tradeoff_svg(points, f"{title}: fabrication vs false refusal", settings.gate.threshold)
    plot.write_text(svg, encoding="utf-8")
    out.write_text(
        render_report(title, results, sweep, settings, profile, plot.name, corpus, cases_path, elapsed_s),
        encoding="utf-8",
    )
