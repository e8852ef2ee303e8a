"""A reading judge over any OpenAI-compatible server (llama.cpp's, Ollama, vLLM, OpenAI's own): a model that
is asked one question a claim and answers Yes or No.

- Support, without the question: "Does the passage state everything the claim says?", the claim against the
  window of the passage it rests on (`claims.verdict.window_of`), with its heading path. The passage comes
  first in the prompt, so a server's prompt cache serves what the claims read against it share.
- Relevance: "Does the sentence answer the question?", from the question, the claim and the passage's
  heading path (`RELEVANCE`). The question comes first, shared by one answer's claims.

Each judgment is a probability: P(Yes) read from the first output token's log-probabilities, at
temperature 0 and one token, normalised over the Yes and No spellings among the top tokens. A server that
sends no log-probabilities is asked for a JSON verdict constrained by a schema instead (`method="json"`, each
judgment then 0 or 1), and the wire says so. Every failure (down, too slow, an HTTP error, a reply with
neither Yes nor No) is a `JudgeError`: the request ends `blocked` with `judge_error`, never unchecked.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Sequence
from typing import Any, Generic, Protocol, TypeVar

import msgspec
import openai
from openai import AsyncOpenAI
from openai.types.chat import ChatCompletion

from provenance import metrics
from provenance.claims.judge.calibration import JudgeCalibration
from provenance.errors import JudgeError, ModelError
from provenance.inference.sdk import SdkErrors, chat_usage, sdk_failures
from provenance.ports import ScoredPassage, Usage
from provenance.wire import JudgeMethod

NO_KEY = "not-needed"
ClientT = TypeVar("ClientT")
CALL = "judge"
SERVER = "judge's model server"
# How many of the first token's alternatives to read: Yes and No are nearly always among the first two.
TOP_LOGPROBS = 10
# A judgment's prompt beside its passage or question: the instructions and the framing lines.
PROMPT_OVERHEAD_TOKENS = 120
# The most claims of one answer the judge reads (a model's decomposition gives at most 8, the openai
# profile's MAX_CLAIMS); any beyond are not supported: the worst case the spend cap reserves is a bound.
MAX_CLAIMS_JUDGED = 8

SUPPORT_SYSTEM = (
    "You check a claim against a passage from a document. Answer with one word, Yes or No. "
    "Yes: the passage states everything the claim says, in the same or other words. "
    "No: the claim says something the passage does not state, changes a fact (a number, a date, a name, who "
    "does what), reverses a rule, or adds a detail."
)


class RelevancePrompt(msgspec.Struct, frozen=True):
    """How the relevance question is put to the judge: a system message, and the user message's template
    (fields `question`, `claim`, `heading`). One value, so that evals can measure another wording through
    the same calls (`evals/judge_relevance.py`) and the cache key can name the one in use."""

    name: str
    system: str
    template: str

    def user(self, question: str, claim: str, heading: str) -> str:
        return self.template.format(question=question, claim=claim, heading=heading)

    @property
    def digest(self) -> str:
        """The wording's own name: what keys the judge's cache tag and the evals' stored judgments."""
        return hashlib.sha256(f"{self.system}\0{self.template}".encode()).hexdigest()[:12]


# Kept after four wordings were measured (evals/results-judge-relevance.md). The best of the others, the
# claim put as a reply whose truth is taken as given, separated the 127 18F pairs better (ROC AUC 0.885
# against 0.845) and passed 62/83 faithful hosted answers against 58, but it is more lenient: in the local
# profile it answered an unanswerable question (a price of another material) and 2 more paraphrase ones.
RELEVANCE = RelevancePrompt(
    name="sentence",
    system=(
        "You check whether a sentence from a document answers a question. Answer with one word, Yes or No. "
        "Yes: the sentence gives the answer, or part of it; a sentence saying that something is not allowed, "
        "not offered or not the case answers a question asking whether it is. "
        "No: the sentence is about something else, or leaves what was asked unanswered."
    ),
    template="Question: {question}\n\nSection: {heading}\nSentence: {claim}\n\nDoes the sentence answer the question?",
)

SDK_ERRORS = SdkErrors(openai.APITimeoutError, openai.APIStatusError, openai.APIConnectionError, openai.OpenAIError)


def support_prompt(claim: str, passage: ScoredPassage) -> str:
    return (
        f"Passage ({passage.heading}):\n{passage.text}\n\n"
        f"Claim: {claim}\n\nDoes the passage state everything the claim says?"
    )


_VERDICT_SCHEMA: dict[str, Any] = {
    "type": "json_schema",
    "json_schema": {
        "name": "verdict",
        "strict": True,
        "schema": {
            "type": "object",
            "properties": {"verdict": {"type": "string", "enum": ["yes", "no"]}},
            "required": ["verdict"],
            "additionalProperties": False,
        },
    },
}


class Judged(msgspec.Struct, frozen=True):
    """One judgment: P(Yes) as the model gave it, and how it was read."""

    p_yes: float
    method: JudgeMethod
    usage: Usage


class ReadingJudge(Protocol):
    """What the judge on top of the local verifier (`claims.verdict.JudgedVerifier`) and the spend cap need of
    a judge: `ModelJudge` here, `claims.judge.claude.ClaudeJudge` on Anthropic's API."""

    model: str
    server: str
    calibration: JudgeCalibration | None
    candidates: int
    json_only: bool

    @property
    def tag(self) -> str: ...

    def calibrated(self, p_yes: float) -> float: ...

    def calibrated_relevance(self, p_yes: float) -> float: ...

    async def support(self, claim: str, passage: ScoredPassage) -> Judged: ...

    async def relevance(self, question: str, claim: str, heading: str) -> Judged: ...

    def worst_case(self, passage_tokens: int) -> list[Usage]: ...


def p_yes_from_logprobs(top: Sequence[tuple[str, float]]) -> float | None:
    """P(Yes) among the Yes and No spellings of the first token's alternatives; None when neither is there."""
    yes = sum(math.exp(lp) for token, lp in top if token.strip().lower() == "yes")
    no = sum(math.exp(lp) for token, lp in top if token.strip().lower() == "no")
    if yes + no <= 0:
        return None
    return yes / (yes + no)


class JudgeBase(Generic[ClientT]):
    """What every reading judge holds whatever its API: its client and model, the server the page names, its
    calibration, and its tag in the answer cache's key."""

    # Before the server in the tag: a judge of another API is another judge, whatever its model's name.
    tag_prefix = "judge"

    def __init__(
        self,
        client: ClientT,
        model: str,
        *,
        server: str,
        calibration: JudgeCalibration | None,
        candidates: int = 2,
        relevance_prompt: RelevancePrompt = RELEVANCE,
    ) -> None:
        self.client = client
        self.model = model
        # What the cache key and the page call the judge's server.
        self.server = server
        self.calibration = calibration
        self.candidates = candidates
        self.relevance_prompt = relevance_prompt

    @property
    def tag(self) -> str:
        """What, beside its settings' names, changes this judge's verdicts: part of the answer cache's key."""
        cal = self.calibration.version if self.calibration is not None else "uncalibrated"
        # The prompts' wording too: an answer judged under other instructions was judged by another judge.
        support = hashlib.sha256(SUPPORT_SYSTEM.encode()).hexdigest()[:12]
        return (
            f"{self.tag_prefix}:{self.server}:{self.model}:{cal}:support={support}"
            f":relevance={self.relevance_prompt.digest}"
        )

    def calibrated(self, p_yes: float) -> float:
        return p_yes if self.calibration is None else self.calibration.apply(p_yes)

    def calibrated_relevance(self, p_yes: float) -> float:
        return p_yes if self.calibration is None else self.calibration.apply_relevance(p_yes)


class ModelJudge(JudgeBase[AsyncOpenAI]):
    """The judge's two questions, each one chat completion of one token."""

    # Set once a server has answered without log-probabilities: from then on, ask for JSON at once.
    json_only = False

    async def support(self, claim: str, passage: ScoredPassage) -> Judged:
        return await self._ask(SUPPORT_SYSTEM, support_prompt(claim, passage), "support")

    async def relevance(self, question: str, claim: str, heading: str) -> Judged:
        prompt = self.relevance_prompt
        return await self._ask(prompt.system, prompt.user(question, claim, heading), "relevance")

    async def _ask(self, system: str, user: str, what: str) -> Judged:
        messages: list[Any] = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        if not self.json_only:
            response = await self._create(messages, what, max_tokens=1, logprobs=True, top_logprobs=TOP_LOGPROBS)
            choice = _first_choice(response, what)
            logprobs = getattr(choice, "logprobs", None)
            content = getattr(logprobs, "content", None) if logprobs is not None else None
            if content:
                top = [(t.token, t.logprob) for t in (content[0].top_logprobs or [])] or [
                    (content[0].token, content[0].logprob)
                ]
                p = p_yes_from_logprobs(top)
                if p is None:
                    raise JudgeError(f"{what} judgment: the judge answered neither Yes nor No", kind="bad_output")
                return Judged(p, "logprobs", self._usage(response, system + user, 1))
            # No log-probabilities from this server: a constrained verdict instead, from now on.
            self.json_only = True
        response = await self._create(messages, what, max_tokens=12, response_format=_VERDICT_SCHEMA)
        choice = _first_choice(response, what)
        if choice.finish_reason == "length":
            raise JudgeError(f"{what} judgment: the judge's verdict was cut off", kind="cut_off")
        text = (choice.message.content or "").lower()
        verdict = (
            "yes"
            if '"yes"' in text or text.strip() == "yes"
            else "no"
            if '"no"' in text or text.strip() == "no"
            else None
        )
        if verdict is None:
            raise JudgeError(f"{what} judgment: the judge's verdict is neither yes nor no", kind="bad_output")
        return Judged(1.0 if verdict == "yes" else 0.0, "json", self._usage(response, system + user, 12))

    async def _create(self, messages: list[Any], what: str, **kwargs: Any) -> ChatCompletion:
        metrics.model_call(CALL)
        try:
            with sdk_failures(SDK_ERRORS, what=f"{what} judgment", call=CALL, server=SERVER):
                response: ChatCompletion = await self.client.chat.completions.create(
                    model=self.model, messages=messages, temperature=0, seed=0, **kwargs
                )
        except ModelError as failure:
            raise JudgeError(str(failure), kind=failure.kind) from None
        return response

    def _usage(self, response: ChatCompletion, prompt: str, max_tokens: int) -> Usage:
        return chat_usage(self.model, response, prompt, max_tokens)

    def worst_case(self, passage_tokens: int) -> list[Usage]:
        """The most one answer's judgments can use: per claim judged, `candidates` support judgments with
        every passage's tokens in each (a bound: one passage is read at a time), and one relevance judgment."""
        claims = MAX_CLAIMS_JUDGED
        per_passage = PROMPT_OVERHEAD_TOKENS + passage_tokens
        calls = [Usage(model=self.model, input_tokens=per_passage, output_tokens=12)] * (claims * self.candidates)
        calls += [Usage(model=self.model, input_tokens=PROMPT_OVERHEAD_TOKENS * 2, output_tokens=12)] * claims
        return calls


def _first_choice(response: ChatCompletion, what: str) -> Any:
    try:
        return response.choices[0]
    except (AttributeError, TypeError, IndexError):
        raise JudgeError(f"{what} judgment: the {SERVER} sent a malformed response", kind="malformed") from None
