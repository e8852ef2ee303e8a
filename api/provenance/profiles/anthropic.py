"""The `anthropic` profile's model calls: screening, generation, and the claims with the model's verdicts.

Every call forces one tool (`tool_choice={"type": "tool", ...}`) so the reply is structured JSON the
SDK has already parsed; the tool input is then validated with msgspec, so a reply of the wrong shape
fails as a `ModelError` here rather than as a KeyError somewhere in the pipeline. The prompts and the
tools' schemas are `profiles.tools`, shared with any other model profile.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

import anthropic
import msgspec
from anthropic import AsyncAnthropic
from anthropic.types import Message, ToolChoiceToolParam, ToolParam, ToolUseBlock

from provenance import metrics
from provenance.embedder import Embedder
from provenance.errors import ModelError, ModelOutputError
from provenance.passages import ScoredPassage
from provenance.ports import (
    Decomposition,
    Generation,
    Profile,
    ScreenVerdict,
    Usage,
    Verification,
)
from provenance.profiles.tools import (
    ANSWER,
    CHECKED_CLAIMS,
    DECOMPOSE_VERIFY_SYSTEM,
    GENERATE_SYSTEM,
    PROMPT_OVERHEAD_TOKENS,
    SCREEN,
    SCREEN_SYSTEM,
    TOKENIZER_SLACK,
    AnswerOut,
    CheckedClaimsOut,
    ScreenOut,
    SdkErrors,
    Tool,
    call_name,
    checked_claims,
    claims_user,
    clamp,
    generate_user,
    generation,
    parse_output,
    screen_user,
    sdk_failure,
)
from provenance.settings import Settings
from provenance.verifiers import LocalVerifier, build_verifier

VERIFIER_NAME = "anthropic-entailment"


def make_client(settings: Settings) -> AsyncAnthropic:
    """One client per process: it owns the connection pool, so the profile's classes share it."""
    if not settings.anthropic.api_key:
        raise ModelError("the anthropic profile needs ANTHROPIC_API_KEY")
    return AsyncAnthropic(
        api_key=settings.anthropic.api_key,
        # None lets the SDK use its default endpoint (or ANTHROPIC_BASE_URL, which it reads itself).
        base_url=settings.anthropic.base_url or None,
        timeout=settings.anthropic.timeout_s,
        max_retries=settings.anthropic.max_retries,
    )


# --- the call --------------------------------------------------------------------------------------


def _usage(model: str, response: Message) -> Usage:
    u = response.usage
    # Cache tokens are billed too; counting them as input over-reports slightly, which errs toward the cap.
    cached = (u.cache_creation_input_tokens or 0) + (u.cache_read_input_tokens or 0)
    return Usage(model=model, input_tokens=u.input_tokens + cached, output_tokens=u.output_tokens)


def tool_param(tool: Tool) -> ToolParam:
    return {"name": tool.name, "description": tool.description, "input_schema": tool.schema}


SCREEN_SCHEMA = tool_param(SCREEN)
ANSWER_SCHEMA = tool_param(ANSWER)
CHECKED_CLAIMS_SCHEMA = tool_param(CHECKED_CLAIMS)


# The SDK's failures, and what its messages call the other end.
SDK_ERRORS = SdkErrors(
    anthropic.APITimeoutError, anthropic.APIStatusError, anthropic.APIConnectionError, anthropic.AnthropicError
)
SERVER = "model API"


async def call_tool(
    client: AsyncAnthropic,
    *,
    model: str,
    system: str,
    user: str,
    tool: ToolParam,
    max_tokens: int,
    what: str,
) -> tuple[dict[str, object], Usage]:
    """One Messages call forced to `tool`; returns the tool input and the usage. Failures → ModelError."""
    name = tool["name"]
    choice: ToolChoiceToolParam = {"type": "tool", "name": name}
    call = call_name(what)
    # One call as the pipeline sees it; the SDK's own retries within it are not counted apart.
    metrics.model_call(call)
    try:
        response = await client.messages.create(
            model=model,
            max_tokens=max_tokens,
            system=system,
            messages=[{"role": "user", "content": user}],
            tools=[tool],
            tool_choice=choice,
        )
    except Exception as exc:
        failure = sdk_failure(exc, SDK_ERRORS, what=what, call=call, server=SERVER)
        if failure is None:
            raise
        raise failure from (exc if failure.kind == "malformed" else None)
    try:
        usage = _usage(model, response)
        content = list(response.content)
    except (AttributeError, TypeError) as exc:
        # Without strict validation the SDK builds its models from whatever JSON arrived.
        raise ModelError(f"{what}: the {SERVER} sent a malformed response", call=call, kind="malformed") from exc
    if response.stop_reason == "max_tokens":
        cut_off = f"{what}: the model's output was cut off at max_tokens"
        raise ModelOutputError(cut_off, usage, call=call, kind="cut_off")
    for block in content:
        if isinstance(block, ToolUseBlock) and block.name == name and isinstance(block.input, dict):
            return dict(block.input), usage
    raise ModelOutputError(
        f"{what}: the model did not call {name} (stop_reason={response.stop_reason})",
        usage,
        call=call,
        kind="no_tool_call",
    )


# --- the ports -------------------------------------------------------------------------------------


class _ToolCaller:
    """What every model-backed port holds, and its one way to call the model: a forced tool call."""

    default_max_output_tokens = 1024

    def __init__(self, client: AsyncAnthropic, model: str, *, max_output_tokens: int | None = None) -> None:
        self.client = client
        self.model = model
        self.max_output_tokens = self.default_max_output_tokens if max_output_tokens is None else max_output_tokens

    async def _call(self, *, system: str, user: str, tool: ToolParam, what: str) -> tuple[dict[str, object], Usage]:
        return await call_tool(
            self.client,
            model=self.model,
            system=system,
            user=user,
            tool=tool,
            max_tokens=self.max_output_tokens,
            what=what,
        )


class AnthropicScreener(_ToolCaller):
    name = "anthropic-screener"

    default_max_output_tokens = 128

    async def classify(self, question: str, passages: Sequence[ScoredPassage]) -> ScreenVerdict:
        user = screen_user(question, passages)
        raw, usage = await self._call(
            system=SCREEN_SYSTEM,
            user=user,
            tool=SCREEN_SCHEMA,
            what="screening",
        )
        label = raw.get("label")
        if isinstance(label, str):
            # "off-topic" / "Off Topic" mean the same thing; don't fail the request over spelling.
            raw["label"] = re.sub(r"[\s-]+", "_", label.strip().lower())
        out = parse_output(raw, ScreenOut, usage, "screening")
        return ScreenVerdict(label=out.label, score=clamp(out.confidence), classifier=self.name, usage=usage)


class AnthropicGenerator(_ToolCaller):
    name = "anthropic-generator"

    async def generate(self, question: str, passages: Sequence[ScoredPassage]) -> Generation:
        if not passages:
            # Nothing to answer from: the empty answer is the only grounded one, and it is free.
            return Generation(answer="", used_passage_ids=[], usage=Usage(model=self.model))
        user = generate_user(question, passages)
        raw, usage = await self._call(
            system=GENERATE_SYSTEM,
            user=user,
            tool=ANSWER_SCHEMA,
            what="generation",
        )
        return generation(parse_output(raw, AnswerOut, usage, "generation", ["used_passage_ids"]), passages, usage)


class AnthropicDecomposeAndVerify(_ToolCaller):
    """Decomposition and entailment in one call, saving a sequential round trip.

    The call's usage is reported once, on the Decomposition; the Verification's usage is None so that
    summing both never charges the same call twice.
    """

    name = VERIFIER_NAME

    default_max_output_tokens = 1536

    async def decompose_and_verify(
        self, question: str, answer: str, passages: Sequence[ScoredPassage]
    ) -> tuple[Decomposition, Verification]:
        if not answer.strip():
            return Decomposition(claims=[], usage=Usage(model=self.model)), Verification(verdicts=[])
        user = claims_user(question, answer, passages)
        raw, usage = await self._call(
            system=DECOMPOSE_VERIFY_SYSTEM,
            user=user,
            tool=CHECKED_CLAIMS_SCHEMA,
            what="claim checking",
        )
        out = parse_output(raw, CheckedClaimsOut, usage, "claim checking", ["claims"])
        return checked_claims(out, passages, usage)


class AnthropicModels(msgspec.Struct, frozen=True):
    """Everything the anthropic profile calls, sharing one client."""

    client: AsyncAnthropic
    screener: AnthropicScreener
    generator: AnthropicGenerator
    decompose_and_verify: AnthropicDecomposeAndVerify

    def worst_case(self, passage_tokens: int) -> list[Usage]:
        """The most one request's calls can use (`Profile.worst_case`): screening, generation and the one
        call that makes the claims, each held at the largest output limit any of them asks for and with
        every passage in its prompt, so the hold covers whichever call runs long. The verifier runs on this
        machine and costs nothing."""
        calls = (self.screener, self.generator, self.decompose_and_verify)
        max_input = PROMPT_OVERHEAD_TOKENS + math.ceil(passage_tokens * TOKENIZER_SLACK)
        max_output = max(call.max_output_tokens for call in calls)
        return [Usage(model=call.model, input_tokens=max_input, output_tokens=max_output) for call in calls]


def build_anthropic_models(settings: Settings, client: AsyncAnthropic | None = None) -> AnthropicModels:
    client = client or make_client(settings)
    model = settings.anthropic.model
    return AnthropicModels(
        client=client,
        screener=AnthropicScreener(client, model),
        generator=AnthropicGenerator(client, model),
        decompose_and_verify=AnthropicDecomposeAndVerify(client, model),
    )


def build_anthropic_profile(
    settings: Settings,
    embedder: Embedder,
    client: AsyncAnthropic | None = None,
    *,
    local: LocalVerifier | None = None,
) -> Profile:
    """The paid profile: Claude screens, answers, and gives the claims with its own verdicts in one call. The
    local verifier judges every claim's support too, and a claim is supported only as far as both agree;
    whether it answers the question is the model's verdict, under the local vetoes."""
    models = build_anthropic_models(settings, client)
    local = local or build_verifier(settings, embedder)
    return Profile(
        name="anthropic",
        screener=models.screener,
        generator=models.generator,
        verifier=local.verifier,
        on_corpus=local.on_corpus,
        worst_case=models.worst_case,
        # Claude screens the question alone, alongside retrieval.
        screener_reads_passages=False,
        cache_tag="|".join(t for t in (settings.anthropic.model, local.cache_tag) if t),
        # The local verifier runs after the combined model call, on the critical path: the passages' sentence
        # vectors come from the store (computed at ingest), never embedded then.
        sentence_vectors=local.sentence_vectors,
        word_vectors=local.word_vectors,
        # Claims and the model's verdicts in one call: three sequential round trips per answer.
        decompose_and_verify=models.decompose_and_verify,
    )
