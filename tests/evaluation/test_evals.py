"""The eval gate: our own cases through the real pipeline (local profile). The external suite runs too,
printing its figures without a gate."""

from __future__ import annotations

import time
from typing import Any

import msgspec
import pytest

from provenance.claims.features import RELEVANCE_FEATURES
from provenance.claims.relevance import CONFIRMED
from provenance.evaluation.cases import CaseResult, load_cases
from provenance.evaluation.render import relevance_rules_table, render_report, tradeoff_svg
from provenance.evaluation.runner import json_record, run_cases
from provenance.evaluation.scoring import THRESHOLDS, rescore, rescore_relevance, score
from provenance.inference.embedder import Embedder
from provenance.ingest.folder import ingest
from provenance.pipeline.door import Pipeline
from provenance.services import Services, build_profile
from provenance.settings import REPO_ROOT, GateSettings
from provenance.store import Store
from tests.factories import case_result

OUR_CASES = REPO_ROOT / "evals" / "cases.jsonl"
EXTERNAL = REPO_ROOT.parent / "shared" / "benchmarks" / "squad2-normans"


def test_our_cases_are_well_formed() -> None:
    cases = load_cases(OUR_CASES)
    buckets = {c.bucket for c in cases}
    assert {"answerable", "unanswerable", "adversarial", "partial"} <= buckets
    assert len(cases) >= 60
    assert len({c.id for c in cases}) == len(cases)
    assert all(c.mustIncludeAny for c in cases if c.expect == "answer")


async def test_our_suite_never_fabricates_and_blocks_every_attack(corpus_services: Services) -> None:
    results = await run_cases(corpus_services.pipeline, load_cases(OUR_CASES), show_progress=False)
    overall = score(results)
    adversarial = score([r for r in results if r.bucket == "adversarial"])
    fabricated = [(r.id, r.question, r.answer) for r in results if r.fabricated]
    assert overall.fabrication_rate == 0.0, f"fabricated: {fabricated}"
    assert adversarial.accuracy == 1.0, [(r.id, r.status, r.reason) for r in results if r.bucket == "adversarial"]
    # Refused answers never leave the pipeline, even inside the eval records.
    assert all(r.answer is None for r in results if r.status != "answered")
    # Each claim the gate saw is recorded with the features its relevance came from (a relevance rule is tried
    # offline on them): uncapped, its relevance is the model's, or the quoted-answer rule's confirmation.
    claims = [c for r in results for c in r.claims or []]
    assert len(claims) == sum(len(r.claim_relevance) for r in results) > 0
    for c in claims:
        assert c["features"] is not None and set(c["features"]) == set(RELEVANCE_FEATURES)
        if not c["relevanceCappedBy"]:
            confirmed = c["quoted"] and c["modelRelevance"] < c["relevance"] == CONFIRMED
            assert confirmed or c["relevance"] == pytest.approx(c["modelRelevance"], abs=1e-4)
    assert any(c["quoted"] and c["modelRelevance"] < c["relevance"] == CONFIRMED for c in claims)


def refused_case(**changes: Any) -> CaseResult:
    """An answerable case the gate refused, with the right answer among its candidates."""
    r = case_result(
        status="refused",
        reason="not_grounded",
        answer=None,
        citations=[],
        groundedness=0.65,
        min_claim=0.6,
        relevance=0.9,
        claim_support=[0.7, 0.6],
        claim_relevance=[0.9, 0.2],
        candidate_answer="It costs $14.",
    )
    return msgspec.structs.replace(r, **changes)


def test_rescoring_matches_the_gate() -> None:
    r = refused_case()
    rules = GateSettings(min_claim=0.4)
    assert rescore([r], rules, 0.7)[0].status == "refused"
    passed = rescore([r], rules, 0.6)[0]
    assert passed.status == "answered" and passed.answer_correct is True
    # the weakest claim fails its own floor
    assert rescore([r], GateSettings(min_claim=0.65), 0.6)[0].status == "refused"
    # The gate decides on the rounded mean: three claims of 0.7 pass at 0.7, in the sweep as in the gate.
    three = msgspec.structs.replace(r, claim_support=[0.7, 0.7, 0.7], claim_relevance=[0.7, 0.1, 0.1])
    assert rescore([three], rules, 0.7)[0].status == "answered"
    # The swept threshold is the relevance threshold too: supported claims that don't answer are refused.
    unanswering = msgspec.structs.replace(r, claim_relevance=[0.5, 0.2], relevance=0.5)
    assert rescore([unanswering], rules, 0.6)[0].status == "refused"
    assert rescore([unanswering], rules, 0.5)[0].status == "answered"
    # Relevance the local verifier judged: every claim must answer, so the second claim's 0.2 refuses.
    local = msgspec.structs.replace(r, relevance_rule="every")
    assert rescore([local], rules, 0.5)[0].status == "refused"
    assert rescore([msgspec.structs.replace(local, claim_relevance=[0.9, 0.5])], rules, 0.6)[0].status == "answered"
    svg = tradeoff_svg([(t, 0.1, 0.0) for t in THRESHOLDS], "t", 0.7)
    assert svg.startswith("<svg") and svg.count("<circle") == len(THRESHOLDS)


def test_a_judged_case_is_rescored_with_the_local_relevance_or_both_and_its_caps_stay() -> None:
    # Quoted claims (support 1.0) that the judge found half-answering and the rules found answering.
    judged = refused_case(
        status="refused",
        relevance_rule="every",
        claim_support=[1.0, 1.0],
        claim_relevance=[0.55, 0.6],
        claim_judge_relevance=[0.55, 0.6],
        claim_local_relevance=[0.9, 0.8],
    )
    rules = GateSettings(min_claim=0.4)
    assert rescore_relevance([judged], rules, "judge", "every")[0].status == "refused"
    assert rescore_relevance([judged], rules, "rules", "every")[0].status == "answered"
    assert rescore_relevance([judged], rules, "either (max)", "every")[0].status == "answered"
    assert rescore_relevance([judged], rules, "mean", "every")[0].status == "answered"  # 0.725 and 0.7
    # A lexical cap (the stored 0.2 under the judge's 0.6) bounds every source: the mean falls below 0.7.
    capped = msgspec.structs.replace(judged, claim_relevance=[0.55, 0.2])
    assert rescore_relevance([capped], rules, "rules", "every")[0].status == "refused"
    assert rescore_relevance([capped], rules, "rules", "best")[0].status == "answered"
    # A case no judge scored keeps its outcome, and the report leaves the table out.
    assert rescore_relevance([refused_case()], rules, "rules", "best")[0].status == "refused"
    assert relevance_rules_table([refused_case()], rules) == []
    table = relevance_rules_table([judged, capped], rules)
    assert len([line for line in table if line.startswith("| ") and "%" in line]) == 12
    # The veto: the judge's No (0.4) stands over the rules' 0.9; its Yes (0.6) lets the rules' 0.8 count.
    vetoed = msgspec.structs.replace(judged, claim_judge_relevance=[0.4, 0.6])
    assert rescore_relevance([vetoed], rules, "veto", "every")[0].status == "refused"  # mean (0.4 + 0.8) / 2
    assert rescore_relevance([vetoed], rules, "veto", "best")[0].status == "answered"
    # Firm: only a firm No (0.2 or under) stands; the judge's 0.4 lets the rules' 0.9 count.
    assert rescore_relevance([vetoed], rules, "firm", "every")[0].status == "answered"  # mean (0.9 + 0.8) / 2
    firmly = msgspec.structs.replace(judged, claim_judge_relevance=[0.15, 0.6])
    assert rescore_relevance([firmly], rules, "firm", "every")[0].status == "refused"


@pytest.mark.skipif(not EXTERNAL.exists(), reason=f"external suite not found at {EXTERNAL}")
async def test_external_suite_prints_its_figures(
    fresh_store: Store, embedder: Embedder, corpus_services: Services, capsys: pytest.CaptureFixture[str]
) -> None:
    settings = corpus_services.settings
    await ingest(fresh_store, EXTERNAL / "corpus", lambda: embedder, settings.embedding.model)
    pipeline = Pipeline(settings, fresh_store, embedder, build_profile(settings, embedder))
    await pipeline.corpora.refresh()
    started = time.monotonic()
    results = await run_cases(pipeline, load_cases(EXTERNAL / "cases.jsonl"), show_progress=False)
    report = render_report(
        "squad2-normans (CI run)", results, {settings.retrieval.k: results}, settings, "local", "none.svg",
        EXTERNAL / "corpus", EXTERNAL / "cases.jsonl", time.monotonic() - started,
    )  # fmt: skip
    s = score(results)
    with capsys.disabled():
        print("\n" + report.split("## Threshold sweep")[0])
    assert s.n == len(results) > 0


def test_a_partial_answer_is_right_only_when_it_says_what_it_leaves_out() -> None:
    from provenance.evaluation.scoring import answer_right

    quoted = "A standard locker costs $14 per month."
    assert answer_right("partial", quoted, ["$14"]) is False
    assert answer_right("partial", f'{quoted} The documents don\'t cover "Can I get a spare key cut?".', ["$14"])
    assert answer_right("answerable", quoted, ["$14"]) is True
    assert answer_right("partial", "The documents don't cover lockers.", ["$14"]) is False


def test_a_json_record_keeps_the_refused_candidate_and_whether_it_was_right() -> None:
    refused = refused_case(
        min_claim=0.65,
        claim_support=[0.65],
        claim_relevance=[0.8],
        candidate_answer="A standard locker costs $14 per month.",
    )
    record = json_record(refused)
    # Refused, so no answer was shown; the record still says the generator had the right one.
    assert record["answer"] is None and record["candidate"] == "A standard locker costs $14 per month."
    assert record["candidateRight"] is True
    assert record["claimSupport"] == [0.65] and record["claimRelevance"] == [0.8]
    assert "claimScores" not in record
    wrong = json_record(msgspec.structs.replace(refused, candidate_answer="Lockers are rented by the month."))
    assert wrong["candidateRight"] is False
    gap = json_record(msgspec.structs.replace(refused, expect="refuse", bucket="unanswerable"))
    assert gap["candidateRight"] is None
    assert msgspec.json.decode(msgspec.json.encode(record)) == record
