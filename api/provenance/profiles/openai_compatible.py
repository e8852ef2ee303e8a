"""The `openai` profile: any server that speaks OpenAI's chat completions (Ollama, llama.cpp's server, vLLM,
LM Studio, OpenAI itself), through the official `openai` SDK.

The same shape as the `anthropic` profile: the model writes the answer citing passage ids, then gives the
claims with its own support and relevance verdicts in one call; the local verifier judges every claim's
support too, and its vetoes apply unchanged. Screening is the local screener's: no screening call goes to
the model. Each call asks for structured output with `response_format` (a JSON schema generated from the
same structs as the anthropic tools, narrowed to the passage ids actually given), and the reply is parsed
tolerantly, since a server may ignore the schema: code fences and leading prose are skipped. Anything that
still doesn't fit, a reply cut off at max_tokens, and every failure of the server (down, too slow, an HTTP
error) is a `ModelError`, so the request ends `blocked` with `model_error` and a detail saying which.
"""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator, Sequence
from typing import Any

import jiter
import openai
from openai import AsyncOpenAI
from openai.types import CompletionUsage
from openai.types.chat import ChatCompletionChunk
from openai.types.shared_params import ResponseFormatJSONSchema

from provenance import metrics
from provenance.claims import LocalVerifier, build_verifier
from provenance.errors import ModelError, ModelOutputError
from provenance.inference.embedder import Embedder
from provenance.inference.sdk import CHARS_PER_TOKEN_ESTIMATE, SdkErrors, chat_usage, sdk_failures
from provenance.inference.streamed_calls import Pace, Watch, estimated_tokens
from provenance.ports import Profile, ScoredPassage, Usage
from provenance.profiles.base import ModelCalls, ModelCondenser, ModelDecomposeAndVerify, ModelGenerator, ModelPort
from provenance.profiles.local import LocalScreener, SentenceDecomposer
from provenance.profiles.outputs import Tool, call_name
from provenance.settings import Bounds, Settings

VERIFIER_NAME = "openai-entailment"
# Local servers need no key, but the SDK refuses to build a client without one.
NO_KEY = "not-needed"
# An answer of one to three sentences has a handful of atomic facts; a small model that loops would
# otherwise write claims until max_tokens cuts it off.
MAX_CLAIMS = 8
# How much longer than a call's ceiling the SDK's own timeout is: never the bound that ends a call.
SDK_TIMEOUT_MARGIN_S = 10.0
# A streamed call on a connection of its own. llama.cpp's server closes the connection after every streamed
# reply while its headers promise keep-alive; on a busy CPU its close comes late, the pool hands the connection
# to the next call (the claims call follows the answer's within milliseconds), and that call is dropped
# unanswered: "Server disconnected without sending a response". A new connection costs a handshake, nothing
# beside a model call.
ONE_CALL_A_CONNECTION = {"Connection": "close"}


def make_client(settings: Settings) -> AsyncOpenAI:
    """One client per process: it owns the connection pool, so the profile's classes share it."""
    s = settings.openai
    return AsyncOpenAI(
        # None is the SDK's default: OpenAI's API, or OPENAI_BASE_URL, which it reads itself.
        base_url=s.base_url or None,
        api_key=s.api_key or NO_KEY,
        # The calls' own bounds (`streamed_calls`) end a call first; the SDK's timeout only backs them up.
        timeout=s.timeout_s + SDK_TIMEOUT_MARGIN_S,
        max_retries=s.max_retries,
    )


# --- the request -----------------------------------------------------------------------------------


def response_format(tool: Tool, passage_ids: Sequence[str]) -> ResponseFormatJSONSchema:
    """`tool`'s output schema as a strict `response_format`: every object closed (strict mode requires it),
    every list of passage ids limited to the ids given, and the claims to MAX_CLAIMS. A server that
    constrains decoding to the schema (llama.cpp, vLLM, OpenAI) then can't cite a passage it wasn't given or
    loop over ids until the token limit; one that ignores it is still parsed tolerantly."""
    return {
        "type": "json_schema",
        "json_schema": {"name": tool.name, "schema": _narrowed(tool.schema, list(passage_ids)), "strict": True},
    }


def _narrowed(node: Any, ids: list[str], field: str = "") -> Any:
    if isinstance(node, list):
        return [_narrowed(v, ids) for v in node]
    if not isinstance(node, dict):
        return node
    out = {k: _narrowed(v, ids) for k, v in node.items() if k != "properties"}
    if "properties" in node:
        out["properties"] = {name: _narrowed(v, ids, name) for name, v in node["properties"].items()}
    if out.get("type") == "object":
        out["additionalProperties"] = False
    if out.get("type") == "array" and field.endswith("passage_ids"):
        # An empty enum is no valid schema; with no passages the only valid list is the empty one.
        out["items"] = {"type": "string", "enum": ids} if ids else {"type": "string"}
        out["maxItems"] = len(ids)
    if out.get("type") == "array" and field == "claims":
        out["maxItems"] = MAX_CLAIMS
    return out


# --- the reply -------------------------------------------------------------------------------------

_FENCED = re.compile(r"```[a-zA-Z]*\s*(.*?)```", re.DOTALL)


def decode_object(text: str) -> dict[str, object] | None:
    """The JSON object in a model's reply, or None. Tolerant of what servers that don't enforce the schema
    send: a reply in a code fence, prose before the object, and text after it."""
    candidates = [m.group(1) for m in _FENCED.finditer(text)] + [text]
    decoder = json.JSONDecoder()
    for candidate in candidates:
        start = candidate.find("{")
        while start != -1:
            try:
                value, _ = decoder.raw_decode(candidate, start)
            except ValueError:
                start = candidate.find("{", start + 1)
                continue
            if isinstance(value, dict):
                return value
            start = candidate.find("{", start + 1)
    return None


def partial_object(text: str) -> dict[str, object] | None:
    """The JSON object a reply cut off mid-way had begun, as far as it got (a string cut off mid-way kept as
    written), or None. jiter's partial mode: the parser both SDKs already use for streamed tool input."""
    start = text.find("{")
    if start == -1:
        return None
    try:
        value = jiter.from_json(text[start:].encode(), partial_mode="trailing-strings")
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


# The SDK's failures, and what its messages call the other end.
SDK_ERRORS = SdkErrors(openai.APITimeoutError, openai.APIStatusError, openai.APIConnectionError, openai.OpenAIError)
SERVER = "model server"


async def call_structured(
    client: AsyncOpenAI,
    *,
    model: str,
    system: str,
    user: str,
    tool: Tool,
    passage_ids: Sequence[str],
    max_tokens: int,
    what: str,
    bounds: Bounds,
    pace: Pace,
) -> tuple[dict[str, object], Usage]:
    """One chat completion asked for `tool`'s output, streamed under `bounds` (`provenance.inference.streamed_calls`);
    returns the decoded object and the usage. Every failure is a ModelError whose message says which it was
    (and whose call and kind the metrics count)."""
    call = call_name(what)
    metrics.model_call(call)
    prompt = system + user
    watch = Watch(
        bounds,
        pace,
        model=model,
        prompt_tokens=estimated_tokens(prompt, CHARS_PER_TOKEN_ESTIMATE),
        what=what,
        call=call,
        server=SERVER,
    )
    with sdk_failures(SDK_ERRORS, what=what, call=call, server=SERVER, watch=watch):
        stream = await watch.opened(
            client.chat.completions.create(
                model=model,
                messages=[{"role": "system", "content": system}, {"role": "user", "content": user}],
                max_tokens=max_tokens,
                # The answer should be the passages', not the sampler's: the same question gets the same answer.
                temperature=0,
                response_format=response_format(tool, passage_ids),
                stream=True,
                # The token counts come in a last chunk of their own (servers that don't send it are estimated).
                stream_options={"include_usage": True},
                extra_headers=ONE_CALL_A_CONNECTION,
            )
        )
        try:
            reply = await _read(watch, stream)
        finally:
            await stream.close()
    return _decoded(reply, model, prompt, max_tokens, what, call)


def _decoded(
    reply: _Reply, model: str, prompt: str, max_tokens: int, what: str, call: str
) -> tuple[dict[str, object], Usage]:
    """The object a finished reply holds, with its usage; a reply that holds none is a ModelError saying why."""
    if not reply.chunks:
        # A body that is no chunk stream at all (a proxy's page sent as 200) parses as an empty stream.
        raise ModelError(f"{what}: the {SERVER} sent a malformed response", call=call, kind="malformed")
    usage = chat_usage(model, reply, prompt, max_tokens)
    content = "".join(reply.content)
    if reply.finish_reason == "length":
        raise ModelOutputError(
            f"{what}: the model's output was cut off at max_tokens",
            usage,
            call=call,
            kind="cut_off",
            partial=partial_object(content),
        )
    if not content.strip():
        said = "declined (a refusal)" if reply.refusal else f"sent no content (finish_reason={reply.finish_reason})"
        raise ModelOutputError(f"{what}: the model {said}", usage, call=call)
    decoded = decode_object(content)
    if decoded is None:
        raise ModelOutputError(f"{what}: the model's output is not a JSON object", usage, call=call)
    return decoded, usage


class _Reply:
    """A streamed reply as its chunks build it: the content's pieces, why it stopped, and its usage."""

    def __init__(self) -> None:
        self.chunks = 0
        self.content: list[str] = []
        self.refusal = False
        self.finish_reason: str | None = None
        self.usage: CompletionUsage | None = None


def _tokens(chunk: ChatCompletionChunk) -> int:
    # A server sends about one token a chunk; a chunk with only the role, or only the usage, carries none.
    return int(any(c.delta is not None and (c.delta.content or c.delta.refusal) for c in chunk.choices or ()))


async def _read(watch: Watch, stream: AsyncIterator[ChatCompletionChunk]) -> _Reply:
    reply = _Reply()
    try:
        async for chunk in watch.chunks(stream, _tokens):
            reply.chunks += 1
            if chunk.usage is not None:
                reply.usage = chunk.usage
            for choice in chunk.choices or ():
                if choice.index != 0:
                    continue
                if choice.delta is not None and choice.delta.content:
                    reply.content.append(choice.delta.content)
                if choice.delta is not None and choice.delta.refusal:
                    reply.refusal = True
                if choice.finish_reason is not None:
                    reply.finish_reason = choice.finish_reason
    except (AttributeError, TypeError) as exc:
        # Without strict validation the SDK builds its models from whatever JSON arrived.
        raise ModelError(
            f"{watch.what}: the {SERVER} sent a malformed response", call=watch.call, kind="malformed"
        ) from exc
    return reply


# --- the ports -------------------------------------------------------------------------------------


class _OpenAIPort(ModelPort[AsyncOpenAI]):
    """A model port whose one way to call the model is a chat completion asked for structured output."""

    async def _call(
        self, *, system: str, user: str, tool: Tool, passages: Sequence[ScoredPassage], what: str
    ) -> tuple[dict[str, object], Usage]:
        return await call_structured(
            self.client,
            model=self.model,
            system=system,
            user=user,
            tool=tool,
            passage_ids=[p.id for p in passages],
            max_tokens=self.max_output_tokens,
            what=what,
            bounds=self.bounds,
            pace=self.pace,
        )


class OpenAICondenser(_OpenAIPort, ModelCondenser[AsyncOpenAI]):
    name = "openai-condenser"


class OpenAIGenerator(_OpenAIPort, ModelGenerator[AsyncOpenAI]):
    name = "openai-generator"


class OpenAIDecomposeAndVerify(_OpenAIPort, ModelDecomposeAndVerify[AsyncOpenAI]):
    """Decomposition and the model's verdicts in one call, as in the anthropic profile."""

    name = VERIFIER_NAME


def build_openai_models(settings: Settings, client: AsyncOpenAI | None = None) -> ModelCalls:
    """The model answers and gives the claims with its verdicts, sharing one client; screening is local."""
    if not settings.openai.model:
        raise ModelError("the openai profile needs OPENAI_MODEL")
    client = client or make_client(settings)
    model = settings.openai.model
    limit = settings.openai.max_output_tokens or None
    bounds = settings.openai.bounds
    # One server, one pace: what the answer's call measures, the claims call's bound uses.
    pace = Pace(bounds.prompt_tokens_per_s)
    claims = (
        OpenAIDecomposeAndVerify(client, model, max_output_tokens=limit, bounds=bounds, pace=pace)
        if settings.claims_from == "model"
        else None
    )
    return ModelCalls(
        generator=OpenAIGenerator(client, model, max_output_tokens=limit, bounds=bounds, pace=pace),
        decompose_and_verify=claims,
        condenser=OpenAICondenser(client, model, bounds=bounds, pace=pace),
    )


def build_openai_profile(
    settings: Settings,
    embedder: Embedder,
    client: AsyncOpenAI | None = None,
    *,
    local: LocalVerifier | None = None,
) -> Profile:
    """The model answers and gives the claims with its own verdicts; the local screener screens and the local
    verifier judges every claim's support too. Paid only when its settings give the server a price."""
    models = build_openai_models(settings, client)
    local = local or build_verifier(settings, embedder)
    server = settings.openai.base_url or "api.openai.com"
    return Profile(
        name="openai",
        screener=LocalScreener(embedder),
        generator=models.generator,
        verifier=local.verifier,
        on_corpus=local.on_corpus,
        # A server on one's own machine costs nothing per token: then the spend cap holds nothing back.
        worst_case=models.worst_case if settings.openai.priced else None,
        # The local screener weighs the question against the retrieved passages.
        screener_reads_passages=True,
        # Another server may serve another model under the same name: both are part of the cache key.
        cache_tag="|".join(t for t in (server, models.generator.model, local.cache_tag) if t),
        sentence_vectors=local.sentence_vectors,
        word_vectors=local.word_vectors,
        decompose_and_verify=models.decompose_and_verify,
        # CLAIMS_FROM=sentences: the answer's sentences, judged on this machine alone.
        decomposer=SentenceDecomposer() if models.decompose_and_verify is None else None,
        passage_tokens=settings.openai.passage_tokens,
        condenser=models.condenser,
    )
