"""A reading judge on Anthropic's Messages API (`JUDGE=anthropic`): a Claude model other than the one that writes
the answer, for a team whose only key is Anthropic's. Same provider, different model: the wire and the page say
so (`JudgeRelation`), never "independent".

It asks the same two questions as the OpenAI-compatible judge (`claims.judge.model`: the same system prompts
and user messages, so one wording is measured for both), through the official SDK. The Messages API gives no
log-probabilities, so each judgment is the verdict of a forced tool whose input schema allows only "yes" or
"no" (`method="json"`, 0 or 1), and the calibration is the raw verdict unless one was fitted for the model.
Every failure (down, too slow, an HTTP error, a refusal, a verdict that is neither yes nor no) is a
`JudgeError`: the request ends `blocked` with `judge_error`, never unchecked.
"""

from __future__ import annotations

import anthropic
from anthropic import AsyncAnthropic
from anthropic.types import ToolChoiceToolParam, ToolParam

from provenance import metrics
from provenance.claims.judge.model import (
    CALL,
    MAX_CLAIMS_JUDGED,
    PROMPT_OVERHEAD_TOKENS,
    SUPPORT_SYSTEM,
    JudgeBase,
    Judged,
    support_prompt,
)
from provenance.errors import JudgeError, ModelError
from provenance.inference.sdk import SdkErrors, sdk_failures
from provenance.ports import ScoredPassage, Usage

SERVER = "judge's model API"
VERDICT_TOOL = "verdict"
# The tool call's JSON, {"verdict": "yes"}, is about a dozen tokens; room to spare, never a cut-off verdict.
MAX_TOKENS = 32
# What a forced tool adds to every prompt: the API's own tool-use system prompt and the tool's definition.
TOOL_OVERHEAD_TOKENS = 400
_TOOL: ToolParam = {
    "name": VERDICT_TOOL,
    "description": "Give your verdict: yes or no.",
    "input_schema": {
        "type": "object",
        "properties": {"verdict": {"type": "string", "enum": ["yes", "no"]}},
        "required": ["verdict"],
        "additionalProperties": False,
    },
}
_CHOICE: ToolChoiceToolParam = {"type": "tool", "name": VERDICT_TOOL}
SDK_ERRORS = SdkErrors(
    anthropic.APITimeoutError, anthropic.APIStatusError, anthropic.APIConnectionError, anthropic.AnthropicError
)


class ClaudeJudge(JudgeBase[AsyncAnthropic]):
    """The judge's two questions, each one Messages call forcing the verdict tool."""

    tag_prefix = "judge:anthropic"
    # The Messages API has no log-probabilities: every judgment is a verdict.
    json_only = True

    async def support(self, claim: str, passage: ScoredPassage) -> Judged:
        return await self._ask(SUPPORT_SYSTEM, support_prompt(claim, passage), "support")

    async def relevance(self, question: str, claim: str, heading: str) -> Judged:
        prompt = self.relevance_prompt
        return await self._ask(prompt.system, prompt.user(question, claim, heading), "relevance")

    async def _ask(self, system: str, user: str, what: str) -> Judged:
        metrics.model_call(CALL)
        try:
            with sdk_failures(SDK_ERRORS, what=f"{what} judgment", call=CALL, server=SERVER):
                message = await self.client.messages.create(
                    model=self.model,
                    system=system,
                    messages=[{"role": "user", "content": user}],
                    max_tokens=MAX_TOKENS,
                    tools=[_TOOL],
                    tool_choice=_CHOICE,
                )
        except ModelError as failure:
            raise JudgeError(str(failure), kind=failure.kind) from None
        used = message.usage
        usage = Usage(model=self.model, input_tokens=used.input_tokens, output_tokens=used.output_tokens)
        if message.stop_reason == "refusal":
            raise JudgeError(f"{what} judgment: the judge refused to judge", usage, kind="bad_output")
        if message.stop_reason == "max_tokens":
            raise JudgeError(f"{what} judgment: the judge's verdict was cut off", usage, kind="cut_off")
        verdict = next(
            (
                block.input.get("verdict")
                for block in message.content
                if block.type == "tool_use" and block.name == VERDICT_TOOL and isinstance(block.input, dict)
            ),
            None,
        )
        if verdict not in ("yes", "no"):
            raise JudgeError(f"{what} judgment: the judge's verdict is neither yes nor no", usage, kind="bad_output")
        return Judged(1.0 if verdict == "yes" else 0.0, "json", usage)

    def worst_case(self, passage_tokens: int) -> list[Usage]:
        """The most one answer's judgments can use: per claim judged, `candidates` support judgments with every
        passage's tokens in each, and one relevance judgment; the forced tool's definition rides in each."""
        overhead = PROMPT_OVERHEAD_TOKENS + TOOL_OVERHEAD_TOKENS
        support = Usage(model=self.model, input_tokens=overhead + passage_tokens, output_tokens=MAX_TOKENS)
        relevance = Usage(model=self.model, input_tokens=overhead + PROMPT_OVERHEAD_TOKENS, output_tokens=MAX_TOKENS)
        return [support] * (MAX_CLAIMS_JUDGED * self.candidates) + [relevance] * MAX_CLAIMS_JUDGED
