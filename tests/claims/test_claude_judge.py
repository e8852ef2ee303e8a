"""JUDGE=anthropic: a Claude model other than the writer judges support and relevance through the official SDK, one
forced `verdict` tool call a judgment, against the fake Messages API (tests/fake_anthropic.py). Every fault ends
the request `blocked` with `judge_error`, uncached; its tag keys the answer cache and its list price feeds the
spend cap; under the anthropic profile it is "same provider, different model", never "independent"."""

from __future__ import annotations

from typing import Any

import pytest

from provenance.claims.judge import anthropic_judge_model, judge_relation
from provenance.claims.judge.claude import VERDICT_TOOL
from provenance.errors import SettingsError
from provenance.inference.embedder import Embedder
from provenance.inference.pricing import cost_usd, price_table
from provenance.pipeline.door import Pipeline
from provenance.ports import Usage
from provenance.services import Services, build_profile
from provenance.settings import Settings
from provenance.wire import AskResponse
from tests.claims.test_judge import LOCKERS
from tests.fake_anthropic import ANSWER_TOOL, PASSAGE_TAG, FakeAnthropic, Reply, default_responder, fake_anthropic
from tests.profiles.test_openai_compatible import RecordingGuards

__all__ = ["fake_anthropic"]  # the fixture, imported so pytest finds it here


def judged_by_claude(base: Settings, fake: FakeAnthropic, **overrides: object) -> Settings:
    given: dict[str, object] = {"judge_max_retries": 0, "judge_timeout_s": 5.0, **overrides}
    return base.with_overrides(
        judge="anthropic", anthropic_api_key=fake.api_key, anthropic_base_url=fake.base_url, **given
    )


LOCKER_PRICE = "A standard locker measures 30 cm by 45 cm by 90 cm and costs $14 per month."


def verdicts(verdict: str) -> Any:
    """The fake's responder: every judgment gets `verdict`; the writer answers the lockers question with its
    sentence, and the profile's other calls get the default replies."""

    def respond(request: Any) -> Reply:
        if request.tool_name == VERDICT_TOOL:
            return Reply(tool_input={"verdict": verdict}, input_tokens=300, output_tokens=9)
        if request.tool_name == ANSWER_TOOL:
            ids = [pid for pid, text in PASSAGE_TAG.findall(request.user_text) if LOCKER_PRICE in text]
            return Reply(tool_input={"answer": LOCKER_PRICE, "used_passage_ids": ids[:1]})
        return default_responder(request)

    return respond


async def ask(services: Services, embedder: Embedder, settings: Settings) -> tuple[AskResponse, RecordingGuards]:
    guards = RecordingGuards()
    pipeline = Pipeline(settings, services.store, embedder, build_profile(settings, embedder), guards)
    await pipeline.corpora.refresh()
    outcome = await pipeline.ask(LOCKERS, request_id="test-claude-judge")
    assert outcome.http_status == 200
    return outcome.response, guards


# --- settings ------------------------------------------------------------------------------------------


def test_the_judge_model_defaults_to_a_claude_model_other_than_the_writer() -> None:
    haiku = Settings().with_overrides(judge="anthropic", anthropic_model="claude-haiku-4-5")
    assert anthropic_judge_model(haiku) == "claude-sonnet-4-6"
    sonnet = Settings().with_overrides(judge="anthropic", anthropic_model="claude-sonnet-4-6")
    assert anthropic_judge_model(sonnet) == "claude-haiku-4-5"
    chosen = Settings().with_overrides(judge="anthropic", judge_model="claude-opus-4-6")
    assert anthropic_judge_model(chosen) == "claude-opus-4-6"


def test_the_writer_s_own_model_or_no_key_is_refused_as_a_claude_judge(embedder: Embedder) -> None:
    same = Settings().with_overrides(
        profile="anthropic", anthropic_api_key="k", judge="anthropic", judge_model="claude-haiku-4-5"
    )
    with pytest.raises(SettingsError, match="JUDGE_MODEL other than ANTHROPIC_MODEL"):
        anthropic_judge_model(same)
    with pytest.raises(SettingsError, match="ANTHROPIC_API_KEY"):
        build_profile(Settings().with_overrides(judge="anthropic"), embedder)


def test_a_claude_judge_of_a_claude_writer_is_same_provider_not_independent() -> None:
    writer = Settings().with_overrides(profile="anthropic", anthropic_api_key="k", judge="anthropic")
    assert judge_relation(writer, anthropic_judge_model(writer)) == "same_provider"
    assert judge_relation(writer, "claude-haiku-4-5") == "same_model"
    extractive = Settings().with_overrides(judge="anthropic")
    assert judge_relation(extractive, "claude-sonnet-4-6") == "independent"


def test_its_tag_keys_the_cache_and_its_list_price_feeds_the_spend_cap(embedder: Embedder) -> None:
    fake = FakeAnthropic()  # never started: building a profile calls nobody
    plain = build_profile(Settings(), embedder)
    sonnet = build_profile(judged_by_claude(Settings(), fake), embedder)
    opus = build_profile(judged_by_claude(Settings(), fake, judge_model="claude-opus-4-6"), embedder)
    assert plain.cache_tag != sonnet.cache_tag != opus.cache_tag
    assert f"judge:anthropic:{fake.base_url}:claude-sonnet-4-6:uncalibrated" in sonnet.cache_tag
    # A free profile with a Claude judge is paid: eight claims, two passages each, and a relevance judgment each.
    assert sonnet.worst_case is not None and sonnet.paid
    calls = sonnet.worst_case(1000)
    assert len(calls) == 24 and all(c.model == "claude-sonnet-4-6" for c in calls)
    prices = price_table(judged_by_claude(Settings(), fake))
    assert cost_usd(Usage(model="claude-sonnet-4-6", input_tokens=1_000_000, output_tokens=0), prices) == 3.0
    # A Claude model missing from the list prices is reserved at the dearest listed price, never the cheapest.
    unlisted = price_table(judged_by_claude(Settings(), fake, judge_model="claude-opus-4-6"))
    assert cost_usd(Usage(model="claude-opus-4-6", input_tokens=0, output_tokens=1_000_000), unlisted) == 15.0
    given = price_table(judged_by_claude(Settings(), fake, judge_price_output_per_mtok=25.0))
    assert cost_usd(Usage(model="claude-sonnet-4-6", input_tokens=0, output_tokens=1_000_000), given) == 25.0


# --- the whole pipeline --------------------------------------------------------------------------------


async def test_a_claude_judge_decides_the_local_profile_s_claims_through_the_verdict_tool(
    fake_anthropic: FakeAnthropic, corpus_services: Services, embedder: Embedder
) -> None:
    fake_anthropic.responder = verdicts("yes")
    r, guards = await ask(corpus_services, embedder, judged_by_claude(corpus_services.settings, fake_anthropic))
    assert r.status == "answered", (r.reason, r.message)
    assert r.stages.entailment.judge == "claude-sonnet-4-6"
    for claim in r.stages.gate.claims:
        assert claim.judge is not None and claim.judge.method == "json" and claim.judge.relation == "independent"
    sent = fake_anthropic.requests_for(VERDICT_TOOL)
    assert sent and all(q.body["model"] == "claude-sonnet-4-6" for q in sent)
    assert all(q.api_key == fake_anthropic.api_key for q in sent)
    schema = sent[0].body["tools"][0]["input_schema"]
    assert schema["properties"]["verdict"]["enum"] == ["yes", "no"]
    assert any(u.model == "claude-sonnet-4-6" and u.input_tokens == 300 for u in guards.settled)
    assert guards.cached and guards.cached[0].status == "answered"


async def test_a_claude_judge_that_says_no_refuses(
    fake_anthropic: FakeAnthropic, corpus_services: Services, embedder: Embedder
) -> None:
    fake_anthropic.responder = verdicts("no")
    r, _ = await ask(corpus_services, embedder, judged_by_claude(corpus_services.settings, fake_anthropic))
    assert r.status == "refused" and r.answer is None


async def test_a_claude_writer_judged_by_another_claude_model_says_same_provider(
    fake_anthropic: FakeAnthropic, corpus_services: Services, embedder: Embedder
) -> None:
    fake_anthropic.responder = verdicts("yes")
    settings = fake_anthropic.settings(corpus_services.settings, judge="anthropic", judge_max_retries=0)
    r, _ = await ask(corpus_services, embedder, settings)
    assert r.status == "answered", (r.reason, r.message)
    judges = [c.judge for c in r.stages.gate.claims]
    assert judges and all(j is not None and j.relation == "same_provider" and j.independent for j in judges)
    writer = {q.body["model"] for q in fake_anthropic.requests if q.tool_name != VERDICT_TOOL}
    judge = {q.body["model"] for q in fake_anthropic.requests_for(VERDICT_TOOL)}
    assert writer == {"claude-haiku-4-5"} and judge == {"claude-sonnet-4-6"}


def _scripted(fake: FakeAnthropic, fault: str) -> None:
    if fault == "http 500":
        fake.fail(500)
    elif fault == "overloaded 529":
        fake.fail(529)
    elif fault == "timeout":
        fake.hang()
    elif fault == "unreadable body":
        fake.enqueue(Reply(raw_body=b"<html>502 Bad Gateway</html>"), tool=VERDICT_TOOL)
    elif fault == "malformed verdict":
        fake.reply(VERDICT_TOOL, {"verdict": "probably"})
    elif fault == "no verdict":
        fake.enqueue(Reply(text="Yes.", stop_reason="end_turn"), tool=VERDICT_TOOL)
    elif fault == "refusal":
        fake.enqueue(Reply(text="", stop_reason="refusal"), tool=VERDICT_TOOL)
    elif fault == "cut off":
        fake.enqueue(Reply(tool_input={"verdict": "ye"}, stop_reason="max_tokens"), tool=VERDICT_TOOL)


@pytest.mark.parametrize(
    ("fault", "says"),
    [
        ("http 500", "answered HTTP 500"),
        ("overloaded 529", "answered HTTP 529"),
        ("timeout", "did not answer in time"),
        ("unreadable body", "unreadable response"),
        ("malformed verdict", "neither yes nor no"),
        ("no verdict", "neither yes nor no"),
        ("refusal", "refused to judge"),
        ("cut off", "cut off"),
    ],
)
async def test_every_fault_of_a_claude_judge_blocks_the_request_uncached(
    fake_anthropic: FakeAnthropic, corpus_services: Services, embedder: Embedder, fault: str, says: str
) -> None:
    fake_anthropic.responder = verdicts("yes")
    settings = judged_by_claude(corpus_services.settings, fake_anthropic, judge_timeout_s=0.5)
    guards = RecordingGuards()
    pipeline = Pipeline(settings, corpus_services.store, embedder, build_profile(settings, embedder), guards)
    await pipeline.corpora.refresh()
    # Scripted after the corpus is loaded, so that the fault meets the first judgment.
    _scripted(fake_anthropic, fault)
    outcome = await pipeline.ask(LOCKERS, request_id="test-claude-judge-fault")
    r = outcome.response
    assert r.status == "blocked" and r.reason == "judge_error", (fault, r.status, r.reason, r.message)
    assert says in (r.message or "") and r.answer is None and r.citations == []
    assert guards.cached == []
