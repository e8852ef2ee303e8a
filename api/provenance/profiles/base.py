"""The model-backed ports every hosted profile shares: screening, generation, and the claims with the model's
verdicts in one call, written once over an abstract call (`ModelPort._call`) that each SDK implements (a
forced tool call for anthropic's, a structured chat completion for an OpenAI-compatible server's). The
prompts are `profiles.prompts`, the outputs asked for and their parse `profiles.outputs`.
"""

from __future__ import annotations

import math
import re
from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, Generic, TypeVar

import msgspec

from provenance.errors import ModelOutputError
from provenance.inference.streamed_calls import Pace
from provenance.ports import Condensation, Decomposition, Generation, ScoredPassage, ScreenVerdict, Usage, Verification
from provenance.profiles.outputs import (
    ANSWER,
    CHECKED_CLAIMS,
    CONDENSE,
    SCREEN,
    AnswerOut,
    CheckedClaimsOut,
    CondenseOut,
    ScreenOut,
    Tool,
    checked_claims,
    clamp,
    generation,
    parse_output,
)
from provenance.profiles.prompts import (
    CONDENSE_ANSWER_CHARS,
    CONDENSE_SYSTEM,
    CONDENSE_TURNS,
    DECOMPOSE_VERIFY_SYSTEM,
    GENERATE_SYSTEM,
    SCREEN_SYSTEM,
    claims_user,
    condense_user,
    generate_user,
    screen_user,
)
from provenance.settings import Bounds
from provenance.text import split_sentences

# For the spend cap's worst case: the system prompt, output schema and question, on top of the passages.
PROMPT_OVERHEAD_TOKENS = 2000
# Passages are chunked with our tokenizer; the model's may count up to about half as many again.
TOKENIZER_SLACK = 1.5

Client = TypeVar("Client")


class ModelPort(ABC, Generic[Client]):
    """What every model-backed port holds (the SDK's client, the model, its output limit, the bounds its
    streamed calls run under and its server's prompt pace), and its one way to call the model, which each
    SDK writes."""

    name: str
    default_max_output_tokens = 1024

    def __init__(
        self,
        client: Client,
        model: str,
        *,
        max_output_tokens: int | None = None,
        bounds: Bounds | None = None,
        pace: Pace | None = None,
    ) -> None:
        self.client = client
        self.model = model
        self.max_output_tokens = self.default_max_output_tokens if max_output_tokens is None else max_output_tokens
        self.bounds = bounds or Bounds()
        # The ports of one server share its pace (`ModelCalls`), so what one call measures the next one uses.
        self.pace = pace or Pace(self.bounds.prompt_tokens_per_s)

    @abstractmethod
    async def _call(
        self, *, system: str, user: str, tool: Tool, passages: Sequence[ScoredPassage], what: str
    ) -> tuple[dict[str, object], Usage]:
        """One call asking for `tool`'s output about `passages`: the output as a JSON object and the call's
        usage. Every failure is a ModelError (billed output that is unusable: ModelOutputError)."""


class ModelScreener(ModelPort[Client]):
    default_max_output_tokens = 128

    async def classify(self, question: str, passages: Sequence[ScoredPassage]) -> ScreenVerdict:
        user = screen_user(question, passages)
        raw, usage = await self._call(system=SCREEN_SYSTEM, user=user, tool=SCREEN, passages=(), what="screening")
        label = raw.get("label")
        if isinstance(label, str):
            # "off-topic" / "Off Topic" mean the same thing; don't fail the request over spelling.
            raw["label"] = re.sub(r"[\s-]+", "_", label.strip().lower())
        out = parse_output(raw, ScreenOut, usage, "screening")
        return ScreenVerdict(label=out.label, score=clamp(out.confidence), classifier=self.name, usage=usage)


class ModelCondenser(ModelPort[Client]):
    """A follow-up rewritten as a standalone question (stages/condense.py): one call, no passages."""

    default_max_output_tokens = 256

    async def condense(self, question: str, earlier: Sequence[tuple[str, str | None]]) -> Condensation:
        user = condense_user(question, earlier)
        raw, usage = await self._call(system=CONDENSE_SYSTEM, user=user, tool=CONDENSE, passages=(), what="condense")
        out = parse_output(raw, CondenseOut, usage, "condense")
        return Condensation(standalone=out.standalone_question, usage=usage)

    def worst_case(self) -> Usage:
        """The call at its limits: the prompt with its earlier turns in full (about 3 characters a token)."""
        history = CONDENSE_TURNS * (2 * CONDENSE_ANSWER_CHARS) // 3
        return Usage(
            model=self.model, input_tokens=PROMPT_OVERHEAD_TOKENS + history, output_tokens=self.max_output_tokens
        )


class ModelGenerator(ModelPort[Client]):
    async def generate(self, question: str, passages: Sequence[ScoredPassage]) -> Generation:
        if not passages:
            # Nothing to answer from: the empty answer is the only grounded one, and it is free.
            return Generation(answer="", used_passage_ids=[], usage=Usage(model=self.model))
        user = generate_user(question, passages)
        try:
            raw, usage = await self._call(
                system=GENERATE_SYSTEM, user=user, tool=ANSWER, passages=passages, what="generation"
            )
        except ModelOutputError as exc:
            salvaged = cut_off_answer(exc)
            if salvaged is None:
                raise
            usage = exc.usage or Usage(model=self.model)
            return msgspec.structs.replace(generation(salvaged, passages, usage), cut_off=True)
        return generation(parse_output(raw, AnswerOut, usage, "generation", ["used_passage_ids"]), passages, usage)


def cut_off_answer(exc: ModelOutputError) -> AnswerOut | None:
    """The answer a generation cut off at max_tokens had written, as its complete sentences, each once, or
    None when it had none. A small model that loops writes the same sentences until the limit: retried at
    temperature 0 it would loop again, so what it did say is checked like any answer, and the wire says it
    was cut off. Its last sentence, cut mid-way, is dropped: half a sentence can say the opposite of the whole."""
    if exc.kind != "cut_off" or exc.partial is None or not isinstance(exc.partial.get("answer"), str):
        return None
    text = str(exc.partial["answer"])
    sentences = split_sentences(text)
    # A closing quote or bracket may follow the stop ('... the "member rate."').
    if sentences and not text.rstrip().rstrip("\"')]\u2019\u201d").endswith((".", "!", "?")):
        sentences = sentences[:-1]
    kept = list(dict.fromkeys(s for s in sentences if s.strip()))
    if not kept:
        return None
    ids = exc.partial.get("used_passage_ids")
    used = [i for i in ids if isinstance(i, str)] if isinstance(ids, list) else []
    return AnswerOut(answer=" ".join(kept), used_passage_ids=used)


class ModelDecomposeAndVerify(ModelPort[Client]):
    """Decomposition and entailment in one call, saving a sequential round trip.

    The call's usage is reported once, on the Decomposition; the Verification's usage is None so that
    summing both never charges the same call twice.
    """

    default_max_output_tokens = 1536

    async def decompose_and_verify(
        self, question: str, answer: str, passages: Sequence[ScoredPassage]
    ) -> tuple[Decomposition, Verification]:
        if not answer.strip():
            return Decomposition(claims=[], usage=Usage(model=self.model)), Verification(verdicts=[])
        user = claims_user(question, answer, passages)
        raw, usage = await self._call(
            system=DECOMPOSE_VERIFY_SYSTEM, user=user, tool=CHECKED_CLAIMS, passages=passages, what="claim checking"
        )
        out = parse_output(raw, CheckedClaimsOut, usage, "claim checking", ["claims"])
        return checked_claims(out, passages, usage)


class ModelCalls(msgspec.Struct, frozen=True):
    """Every model call a profile makes, sharing one client: the generator, the decompose-and-verify call
    unless the claims are the answer's sentences (CLAIMS_FROM=sentences), and the screener where the model
    screens (the anthropic profile's; the openai profile screens on this machine). The verifier runs on this
    machine and costs nothing."""

    generator: ModelGenerator[Any]
    decompose_and_verify: ModelDecomposeAndVerify[Any] | None
    screener: ModelScreener[Any] | None = None
    # A follow-up's rewrite (stages/condense.py): priced apart, since only a follow-up makes it.
    condenser: ModelCondenser[Any] | None = None

    def worst_case(self, passage_tokens: int) -> list[Usage]:
        """The most one request's calls can use (`Profile.worst_case`)."""
        calls = [c for c in (self.screener, self.generator, self.decompose_and_verify) if c is not None]
        return worst_case(calls, passage_tokens)


def worst_case(calls: Sequence[ModelPort[Any]], passage_tokens: int) -> list[Usage]:
    """The most one request's `calls` can use (`Profile.worst_case`), each held at the largest output limit
    any of them asks for and with every passage in its prompt, so the hold covers whichever call runs long."""
    max_input = PROMPT_OVERHEAD_TOKENS + math.ceil(passage_tokens * TOKENIZER_SLACK)
    max_output = max(call.max_output_tokens for call in calls)
    return [Usage(model=call.model, input_tokens=max_input, output_tokens=max_output) for call in calls]
