"""The reading judge (`JUDGE`): a model over an OpenAI-compatible API judges support and relevance, read from
the first token's log-probabilities; the rules' vetoes stay final; every failure ends the request `blocked`
with `judge_error`, uncached and refunded. The judge here is a few lines of HTTP on loopback whose every
verdict the test decides (`tests.scripted_server`); the real llama.cpp server's wire is tested in
`tests/profiles/test_openai_compatible.py`."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import msgspec
import pytest
import pytest_asyncio

from provenance.claims.features import build_feature_verifier
from provenance.claims.judge import client_for
from provenance.claims.judge.calibration import JudgeCalibration, calibration_for, save_calibration
from provenance.claims.judge.model import RELEVANCE, ModelJudge, p_yes_from_logprobs
from provenance.claims.support import FACT_VETO
from provenance.claims.verdict import JudgedVerifier, combine
from provenance.errors import SettingsError
from provenance.inference.embedder import Embedder
from provenance.pipeline.door import Pipeline
from provenance.ports import ClaimVerdict, ScoredPassage, Verification, Verifier
from provenance.services import Services, build_profile
from provenance.settings import Settings, load_settings
from provenance.wire import AskResponse
from tests.profiles.test_openai_compatible import RecordingGuards
from tests.scripted_server import ScriptedServer, logprob_reply

JUDGE = "scripted-judge"
LOCKERS = "How much does a standard locker cost per month?"


@pytest_asyncio.fixture(loop_scope="session")
async def judge_server() -> AsyncIterator[tuple[ScriptedServer, str]]:
    server = ScriptedServer(model=JUDGE)
    url = await server.start()
    yield server, url
    await server.close()


def says(p_yes: float) -> Any:
    return lambda request: (200, logprob_reply(JUDGE, p_yes))


def judge_settings(base: Settings, url: str, **overrides: object) -> Settings:
    given: dict[str, object] = {"judge_max_retries": 0, "judge_timeout_s": 5, **overrides}
    return base.with_overrides(judge="openai", judge_base_url=url, judge_model=JUDGE, **given)


async def ask(
    services: Services, embedder: Embedder, url: str, question: str = LOCKERS, **overrides: object
) -> tuple[AskResponse, RecordingGuards]:
    settings = judge_settings(services.settings, url, **overrides)
    guards = RecordingGuards()
    pipeline = Pipeline(settings, services.store, embedder, build_profile(settings, embedder), guards)
    await pipeline.corpora.refresh()
    outcome = await pipeline.ask(question, request_id="test-judge")
    assert outcome.http_status == 200
    return outcome.response, guards


# --- settings ------------------------------------------------------------------------------------------


def test_the_old_switch_sets_both_local_models_and_the_new_ones_say_which() -> None:
    both = load_settings({"LOCAL_MODELS": "trained"})
    assert both.local_verifier == "trained" and both.local_generator == "trained"
    one = load_settings({"LOCAL_VERIFIER": "trained"})
    assert one.local_verifier == "trained" and one.local_generator == "features"
    with pytest.raises(SettingsError, match="LOCAL_GENERATOR"):
        load_settings({"LOCAL_MODELS": "trained", "LOCAL_GENERATOR": "features"})
    with pytest.raises(SettingsError, match="LOCAL_VERIFIER and LOCAL_GENERATOR"):
        load_settings({"LOCAL_MODELS": "big"})


@pytest.mark.parametrize(
    ("env", "names"),
    [
        ({"JUDGE": "openai", "JUDGE_BASE_URL": "http://h/v1"}, "JUDGE_MODEL"),
        ({"JUDGE": "openai", "JUDGE_MODEL": "m"}, "JUDGE_BASE_URL"),
        ({"JUDGE": "openai", "JUDGE_MODEL": "m", "JUDGE_BASE_URL": "h:1"}, "JUDGE_BASE_URL"),
        ({"JUDGE": "someone"}, "JUDGE"),
        ({"JUDGE_TIMEOUT_S": "0"}, "JUDGE_TIMEOUT_S"),
        ({"JUDGE_CANDIDATES": "0"}, "JUDGE_CANDIDATES"),
        ({"JUDGE_RELEVANCE": "rules"}, "JUDGE_RELEVANCE"),
    ],
)
def test_bad_judge_settings_name_the_variable(env: dict[str, str], names: str) -> None:
    with pytest.raises(SettingsError, match=names):
        load_settings(env)


def test_p_yes_is_read_over_the_spellings_of_yes_and_no() -> None:
    assert p_yes_from_logprobs([("Yes", -0.1), (" yes", -3.0), ("No", -2.5), ("Maybe", -1.0)]) == pytest.approx(
        (0.904837 + 0.049787) / (0.904837 + 0.049787 + 0.082085), rel=1e-4
    )
    assert p_yes_from_logprobs([("Maybe", -0.1), ("The", -1.0)]) is None


# --- the judge under the rules' vetoes -----------------------------------------------------------------

PASSAGE = ScoredPassage(
    id="lockers.md#prices",
    source="lockers.md",
    heading="Lockers > Prices",
    text="A standard locker costs $14 per month. A large locker costs $22 per month.",
    score=0.9,
)


async def test_a_judge_that_says_yes_to_everything_cant_overrule_a_veto(
    judge_server: tuple[ScriptedServer, str], embedder: Embedder
) -> None:
    server, url = judge_server
    server.reply = says(0.99)
    rules = build_feature_verifier(embedder)
    rules.set_corpus([(PASSAGE.text, ())])
    judge = ModelJudge(client_for(Settings(), url), JUDGE, server=url, calibration=None)
    verifier = JudgedVerifier(rules, judge, independent=True)
    claims = ["Each month a standard locker is $14.", "A standard locker costs $99 per month."]
    before = len(server.requests)
    verification = await verifier.verify(LOCKERS, claims, [PASSAGE])
    right, changed = verification.verdicts
    # The reworded right claim: the judge's verdict is its support, the rules' is recorded beside it.
    assert right.support == pytest.approx(0.99) and right.veto is None
    assert right.judge is not None and right.judge.raw_support == pytest.approx(0.99)
    assert right.judge.model == JUDGE and right.judge.method == "logprobs" and not right.judge.calibrated
    assert right.local_support is not None
    assert right.relevance == pytest.approx(0.99)
    # The changed number: vetoed, whatever the judge says, and not asked about relevance.
    assert changed.veto == "fact_not_stated" and changed.support <= FACT_VETO
    assert changed.judge is not None and changed.judge.relevance is None
    sent = server.requests[before:]
    # Two support judgments and one relevance judgment, each one token at temperature 0 with logprobs.
    assert len(sent) == 3
    assert all(r["max_tokens"] == 1 and r["temperature"] == 0 and r["logprobs"] is True for r in sent)
    # The judge reads the window the rules found the claim in, under its heading, before the claim (a shared
    # prefix for the server's prompt cache); not the rest of the passage.
    support_prompt = sent[0]["messages"][1]["content"]
    window = "Passage (Lockers > Prices):\nA standard locker costs $14 per month."
    assert support_prompt.index(window) < support_prompt.index(claims[0]) and "large locker" not in support_prompt
    assert verification.usage is not None and verification.usage.model == JUDGE
    assert verification.usage.input_tokens == 600


async def test_a_quoted_claim_needs_no_support_judgment(
    judge_server: tuple[ScriptedServer, str], embedder: Embedder
) -> None:
    server, url = judge_server
    server.reply = says(0.8)
    rules = build_feature_verifier(embedder)
    rules.set_corpus([(PASSAGE.text, ())])
    verifier = JudgedVerifier(
        rules, ModelJudge(client_for(Settings(), url), JUDGE, server=url, calibration=None), independent=True
    )
    before = len(server.requests)
    [quoted] = (await verifier.verify(LOCKERS, ["A standard locker costs $14 per month."], [PASSAGE])).verdicts
    assert quoted.support == 1.0 and quoted.quoted
    assert quoted.judge is not None and quoted.judge.judgments == 0 and quoted.judge.relevance == pytest.approx(0.8)
    [relevance] = server.requests[before:]
    assert relevance["messages"][1]["content"].startswith(f"Question: {LOCKERS}")


QUOTE = "A standard locker costs $14 per month."


async def _quoted_locker(
    judge_server: tuple[ScriptedServer, str], embedder: Embedder, p_yes: float
) -> tuple[Verifier, ModelJudge, ClaimVerdict]:
    """The rules over the lockers passage, a judge whose every P(Yes) is `p_yes`, and the rules' own verdict on
    the passage's price sentence quoted, which they read as the answer."""
    server, url = judge_server
    server.reply = says(p_yes)
    rules = build_feature_verifier(embedder)
    rules.set_corpus([(PASSAGE.text, ())])
    judge = ModelJudge(client_for(Settings(), url), JUDGE, server=url, calibration=None)
    [own] = (await rules.verify(LOCKERS, [QUOTE], [PASSAGE])).verdicts
    assert own.relevance is not None and own.relevance > 0.6  # the rules read it as the answer
    return rules, judge, own


@pytest.mark.parametrize(("p_yes", "rules_stand"), [(0.6, True), (0.3, False)])
async def test_the_veto_rule_keeps_the_local_relevance_unless_the_judge_says_no(
    judge_server: tuple[ScriptedServer, str], embedder: Embedder, p_yes: float, rules_stand: bool
) -> None:
    rules, judge, own = await _quoted_locker(judge_server, embedder, p_yes)
    [by_judge] = (await JudgedVerifier(rules, judge, independent=True).verify(LOCKERS, [QUOTE], [PASSAGE])).verdicts
    assert by_judge.relevance == pytest.approx(p_yes)
    vetoing = JudgedVerifier(rules, judge, independent=True, relevance="veto")
    [veto] = (await vetoing.verify(LOCKERS, [QUOTE], [PASSAGE])).verdicts
    # A timid Yes lets the rules' higher relevance stand; a No is the judge's, whatever the rules say.
    assert veto.relevance == pytest.approx(own.relevance if rules_stand else p_yes)
    assert veto.judge is not None and veto.judge.raw_relevance == pytest.approx(p_yes)
    assert veto.judge.relevance == pytest.approx(p_yes)  # the judge's own verdict, shown as its
    assert veto.local_relevance == pytest.approx(own.relevance)


@pytest.mark.parametrize(("p_yes", "others_stand"), [(0.3, True), (0.15, False)])
async def test_the_firm_rule_lets_the_rules_and_the_writer_stand_unless_the_judge_says_a_firm_no(
    judge_server: tuple[ScriptedServer, str], embedder: Embedder, p_yes: float, others_stand: bool
) -> None:
    rules, judge, own = await _quoted_locker(judge_server, embedder, p_yes)
    firm = JudgedVerifier(rules, judge, independent=True, relevance="firm")
    judged = await firm.verify(LOCKERS, [QUOTE], [PASSAGE])
    [verdict] = judged.verdicts
    # Under one half, which `veto` takes for a No; only at FIRM_NO or under does the judge's verdict stand.
    assert verdict.relevance == pytest.approx(own.relevance if others_stand else p_yes)
    assert verdict.writer_may_raise is others_stand
    # The writer's own verdict (a model profile's claims call) counts the same way.
    writer = Verification(verdicts=[ClaimVerdict(support=0.95, supporting_passage_ids=[PASSAGE.id], relevance=0.97)])
    [result] = combine([QUOTE], judged, writer)
    assert result.relevance == pytest.approx(0.97 if others_stand else p_yes)
    assert result.model_relevance == pytest.approx(0.97) and result.judge is not None


def test_the_shipped_calibration_is_found_for_the_local_judge() -> None:
    """The file the package ships, at the path the judge reads: a judge without it runs uncalibrated, which
    nothing else would notice (it did, from the move of the judge into claims/judge/ until this test)."""
    from provenance.claims.judge.calibration import CALIBRATION_PATH
    from provenance.inference.llm_server import QWEN_FILE

    assert CALIBRATION_PATH.is_file(), CALIBRATION_PATH
    found = calibration_for(Path(QWEN_FILE).stem)
    assert found is not None and found.pairs > 0
    # A timid Yes maps below the gate's weakest-claim floor; a firm one stays above the gate.
    assert found.apply(0.55) < 0.4 < 0.7 < found.apply(0.96)


def test_a_calibration_maps_p_yes_and_is_found_by_model(tmp_path: Path) -> None:
    path = tmp_path / "calibration.json"
    cal = JudgeCalibration(model="Qwen-Judge", a=2.0, b=-1.0, fitted_on="pairs", pairs=10, auc=0.9)
    save_calibration(cal, path)
    found = calibration_for("qwen-judge", path)
    assert found is not None and found.apply(0.5) == pytest.approx(1 / (1 + 2.718281828**1.0), rel=1e-6)
    assert found.apply(0.99) > 0.99 > found.apply(0.6)
    assert calibration_for("another", path) is None


# --- the whole pipeline with a judge -------------------------------------------------------------------


async def test_the_page_object_names_the_judge_and_its_verdicts(
    judge_server: tuple[ScriptedServer, str], corpus_services: Services, embedder: Embedder
) -> None:
    server, url = judge_server
    server.reply = says(0.97)
    r, guards = await ask(corpus_services, embedder, url)
    assert r.status == "answered", (r.reason, r.message)
    assert r.stages.entailment.judge == JUDGE and r.stages.entailment.judge_calibrated is False
    for claim in r.stages.gate.claims:
        assert claim.judge is not None and claim.judge.model == JUDGE and claim.judge.independent
        assert claim.relevance == pytest.approx(0.97)
    # The judge's tokens are metered under its own name.
    assert any(u.model == JUDGE and u.input_tokens > 0 for u in guards.settled)
    assert guards.cached and guards.cached[0].status == "answered"


async def test_a_judge_that_says_it_does_not_answer_refuses(
    judge_server: tuple[ScriptedServer, str], corpus_services: Services, embedder: Embedder
) -> None:
    server, url = judge_server
    server.reply = says(0.05)
    r, _ = await ask(corpus_services, embedder, url)
    assert r.status == "refused" and r.reason == "not_an_answer" and r.answer is None


def _no_logprobs(request: dict[str, Any]) -> tuple[int, bytes]:
    content = '{"verdict": "yes"}' if request.get("response_format") else "Yes"
    reply = {
        "id": "j",
        "object": "chat.completion",
        "created": 0,
        "model": JUDGE,
        "choices": [{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 50, "completion_tokens": 5, "total_tokens": 55},
    }
    return 200, json.dumps(reply).encode()


async def test_a_server_without_logprobs_gives_a_json_verdict_and_the_wire_says_so(
    judge_server: tuple[ScriptedServer, str], corpus_services: Services, embedder: Embedder
) -> None:
    server, url = judge_server
    server.reply = _no_logprobs
    r, _ = await ask(corpus_services, embedder, url)
    assert r.status == "answered", (r.reason, r.message)
    assert all(c.judge is not None and c.judge.method == "json" for c in r.stages.gate.claims)
    assert server.requests[-1]["response_format"]["json_schema"]["schema"]["properties"]["verdict"]["enum"] == [
        "yes",
        "no",
    ]


def _cut_off(request: dict[str, Any]) -> tuple[int, bytes]:
    status, body = _no_logprobs(request)
    reply = json.loads(body)
    reply["choices"][0]["finish_reason"] = "length"
    reply["choices"][0]["message"]["content"] = '{"verd'
    return status, json.dumps(reply).encode()


@pytest.mark.parametrize(
    ("reply", "says_"),
    [
        (lambda r: (500, b'{"error": {"message": "boom"}}'), "answered HTTP 500"),
        (lambda r: (200, b"<html>502 Bad Gateway</html>"), "sent an unreadable response"),
        (
            lambda r: (200, logprob_reply(JUDGE, 0.9).replace(b'"Yes"', b'"Maybe"').replace(b'"No"', b'"Perhaps"')),
            "neither Yes nor No",
        ),
        (_cut_off, "cut off"),
    ],
)
async def test_a_failing_judge_blocks_the_request_uncached_and_refunded(
    judge_server: tuple[ScriptedServer, str],
    corpus_services: Services,
    embedder: Embedder,
    reply: Any,
    says_: str,
) -> None:
    server, url = judge_server
    server.reply = reply
    r, guards = await ask(corpus_services, embedder, url)
    assert r.status == "blocked" and r.reason == "judge_error", (r.status, r.reason, r.message)
    assert says_ in (r.message or "") and r.answer is None and r.citations == []
    assert guards.cached == []


async def test_a_judge_that_is_down_or_hangs_blocks(
    judge_server: tuple[ScriptedServer, str], corpus_services: Services, embedder: Embedder
) -> None:
    server, url = judge_server
    r, _ = await ask(corpus_services, embedder, "http://127.0.0.1:9/v1")
    assert r.status == "blocked" and r.reason == "judge_error" and "could not reach" in (r.message or "")
    server.reply, server.hang = says(0.9), True
    try:
        r, _ = await ask(corpus_services, embedder, url, judge_timeout_s=0.5)
    finally:
        server.hang = False
    assert r.status == "blocked" and r.reason == "judge_error" and "did not answer in time" in (r.message or "")


def test_the_cache_key_changes_with_the_judge_and_its_calibration(embedder: Embedder) -> None:
    plain = build_profile(Settings(), embedder)
    judged = build_profile(judge_settings(Settings(), "http://127.0.0.1:1/v1"), embedder)
    other = build_profile(judge_settings(Settings(), "http://127.0.0.1:2/v1"), embedder)
    assert plain.cache_tag != judged.cache_tag != other.cache_tag
    assert f"judge:http://127.0.0.1:1/v1:{JUDGE}:uncalibrated" in judged.cache_tag
    assert judged.judge is not None and not judged.judge.calibrated and plain.judge is None
    by_judge = build_profile(judge_settings(Settings(), "http://127.0.0.1:1/v1", judge_relevance="judge"), embedder)
    assert by_judge.cache_tag != judged.cache_tag


def test_the_judge_s_tag_names_its_prompts_wording() -> None:
    client = client_for(Settings(), "http://127.0.0.1:1/v1")
    judge = ModelJudge(client, JUDGE, server="local", calibration=None)
    reworded = msgspec.structs.replace(RELEVANCE, system=RELEVANCE.system + " Be brief.")
    other = ModelJudge(client, JUDGE, server="local", calibration=None, relevance_prompt=reworded)
    assert judge.tag != other.tag
    assert judge.tag == ModelJudge(client, JUDGE, server="local", calibration=None).tag


def test_a_priced_judge_is_reserved_for_in_a_free_profile(embedder: Embedder) -> None:
    settings = judge_settings(Settings(), "http://127.0.0.1:1/v1", judge_price_input_per_mtok=1.0)
    profile = build_profile(settings, embedder)
    assert profile.worst_case is not None and profile.paid
    calls = profile.worst_case(1000)
    # Eight claims, two passages each, and a relevance judgment each.
    assert len(calls) == 24 and all(c.model == JUDGE for c in calls)
