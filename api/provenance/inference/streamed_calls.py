"""What every streamed model call shares, whichever SDK makes it: its bounds on progress, the prompt pace
measured at its server, and the progress it reports while the model writes.

A model call on a CPU server can take minutes and still be doing fine: the prompt alone may take most of a
minute before the first token, then tokens come a few a second. A single timeout on the whole call can't tell
that from a server that hung, so a streamed call is bounded three ways (`Bounds`):

- the first token, within a floor plus the prompt's tokens at the server's prompt pace (as configured, or
  slower where calls have measured it slower: `Pace`);
- the gap between one token and the next;
- the whole call, a ceiling however steadily it streams.

Each bound that is hit is a `ModelError` of kind `timeout` whose message names the bound. A call that
streamed tokens is never retried (the SDKs retry only before a response begins), so a slow call is not paid
for twice.

Progress goes to whoever set `PROGRESS` for the request (the streamed /ask): the stage, the tokens so far and
the seconds since the call began, never the text.
"""

from __future__ import annotations

import asyncio
import contextvars
import math
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Literal, TypeVar

import msgspec

from provenance.errors import ModelError
from provenance.logs import get_logger
from provenance.ports import Usage
from provenance.settings import Bounds

log = get_logger("provenance.inference.streamed_calls")

T = TypeVar("T")

Bound = Literal["first_token", "gap", "ceiling"]
# The stages of /ask whose model calls report progress, by their wire keys.
ProgressStage = Literal["screening", "generation", "decomposition", "entailment"]
# The stage a call's `what` (as its error messages name it) reports progress under.
STAGE_OF_CALL: dict[str, ProgressStage] = {
    "screening": "screening",
    "generation": "generation",
    "claim checking": "decomposition",
}
# How much faster than the pace the prompt may be expected to go is never assumed; how much slower, this: a
# server busy with another request's prompt, or a prompt the estimate undercounts.
PACE_SLACK = 2.0
# The weight of the newest measurement in the measured pace (an exponential moving average).
PACE_WEIGHT = 0.3


class Pace:
    """A server's prompt pace: the configured tokens a second, or slower where calls have measured it so.

    Measured from the time to each call's first token over its prompt's (estimated) tokens. Only ever
    slower than configured: a prompt the server had cached looks fast, and trusting it would time out the
    next prompt it has not."""

    def __init__(self, configured: float) -> None:
        self.configured = configured
        self.measured: float | None = None

    @property
    def tokens_per_s(self) -> float:
        return self.configured if self.measured is None else min(self.configured, self.measured)

    def observe(self, prompt_tokens: int, seconds: float) -> None:
        if prompt_tokens <= 0 or seconds <= 0:
            return
        # Faster than configured counts as configured: one cached prompt must not outweigh the slow ones.
        speed = min(self.configured, prompt_tokens / seconds)
        self.measured = speed if self.measured is None else (1 - PACE_WEIGHT) * self.measured + PACE_WEIGHT * speed


def first_token_s(bounds: Bounds, pace: Pace, prompt_tokens: int) -> float:
    """How long a prompt of `prompt_tokens` may take to its first token: the floor plus its reading time."""
    reading = PACE_SLACK * prompt_tokens / pace.tokens_per_s if pace.tokens_per_s > 0 else 0.0
    return min(bounds.ceiling_s, bounds.first_token_s + reading)


class Progress(msgspec.Struct, frozen=True):
    """One call's progress: the stage it serves, the tokens written so far, and the seconds it has taken."""

    stage: ProgressStage
    tokens: int
    elapsed_s: float


OnProgress = Callable[[Progress], None]
# Set for a request whose caller shows its progress (the streamed /ask); the pipeline's task inherits it.
PROGRESS: contextvars.ContextVar[OnProgress | None] = contextvars.ContextVar("provenance_progress", default=None)


def report(stage: ProgressStage, tokens: int, elapsed_s: float) -> None:
    """Tell the request's listener, if it has one, how a stage is getting on."""
    listener = PROGRESS.get()
    if listener is not None:
        listener(Progress(stage=stage, tokens=tokens, elapsed_s=round(elapsed_s, 1)))


class Watch:
    """One streamed call under its bounds: `opened` awaits the response's start, `chunks` its stream; both
    raise the bound that was hit as a ModelError, and count the tokens written for the progress reports."""

    def __init__(
        self, bounds: Bounds, pace: Pace, *, model: str, prompt_tokens: int, what: str, call: str, server: str
    ) -> None:
        self.model = model
        self.bounds = bounds
        self.pace = pace
        self.prompt_tokens = prompt_tokens
        self.what = what
        self.call = call
        self.server = server
        self.stage = STAGE_OF_CALL.get(what)
        self.tokens = 0
        self._started = time.monotonic()
        self._first_within = first_token_s(bounds, pace, prompt_tokens)
        self._last = self._started

    @property
    def elapsed_s(self) -> float:
        return time.monotonic() - self._started

    def _deadline(self) -> tuple[float, Bound]:
        ceiling = self._started + self.bounds.ceiling_s
        if self.tokens == 0:
            first = self._started + self._first_within
            return (first, "first_token") if first < ceiling else (ceiling, "ceiling")
        gap = self._last + self.bounds.gap_s
        return (gap, "gap") if gap < ceiling else (ceiling, "ceiling")

    async def _bounded(self, step: Awaitable[T]) -> T:
        deadline, bound = self._deadline()
        # asyncio's clock, not time.monotonic's: the loop's deadlines are on it.
        loop_deadline = asyncio.get_running_loop().time() + (deadline - time.monotonic())
        try:
            async with asyncio.timeout_at(loop_deadline):
                return await step
        except TimeoutError:
            # How late the bound fired tells a server that went quiet (on time) from an event loop kept busy
            # by something else (late, with chunks perhaps waiting unread in the socket).
            late_s = asyncio.get_running_loop().time() - loop_deadline
            log.warning(
                "model_call_bound_hit", call=self.call, bound=bound, tokens=self.tokens, late_s=round(late_s, 3)
            )
            raise self.timed_out(bound) from None

    def timed_out(self, bound: Bound) -> ModelError:
        """The ModelError for `bound`, its message naming it and what the call had done by then."""
        if bound == "first_token":
            why = (
                f"no first token within {self._first_within:.1f} s (the first-token floor of "
                f"{self.bounds.first_token_s:g} s, plus about {self.prompt_tokens} prompt tokens at "
                f"{self.pace.tokens_per_s:.0f} tokens/s)"
            )
        elif bound == "gap":
            why = f"no token for {self.bounds.gap_s:g} s, after {self.tokens} tokens (the token-gap bound)"
        elif self.tokens:
            why = f"still writing after {self.bounds.ceiling_s:g} s, at {self.tokens} tokens (the ceiling)"
        else:
            why = f"no token within {self.bounds.ceiling_s:g} s, the most one call may take (the ceiling)"
        message = f"{self.what}: the {self.server} did not answer in time: {why}"
        return ModelError(message, self._usage_so_far(), call=self.call, kind="timeout")

    def broke_off(self) -> ModelError:
        """The ModelError for a connection lost after the stream began: the server went away mid-answer."""
        message = f"{self.what}: the connection to the {self.server} broke off after {self.tokens} tokens"
        return ModelError(message, self._usage_so_far(), call=self.call, kind="connection")

    def _usage_so_far(self) -> Usage | None:
        # A call cut off after it wrote has been paid for what it read and wrote (by estimate: the server
        # counts only at the end); one cut off before its first token, like any failed call, for nothing.
        if not self.tokens:
            return None
        return Usage(model=self.model, input_tokens=self.prompt_tokens, output_tokens=self.tokens)

    async def opened(self, start: Awaitable[T]) -> T:
        """The response's start (an SDK's stream object), under the first-token bound."""
        if self.stage is not None:
            # The model reads the prompt before it writes: on a CPU, most of a minute, and it is shown.
            report(self.stage, 0, 0.0)
        return await self._bounded(start)

    async def chunks(self, stream: AsyncIterator[T], tokens: Callable[[T], int]) -> AsyncIterator[T]:
        """`stream`'s chunks, each within its bound; `tokens` says how many tokens a chunk carries."""
        iterator = aiter(stream)
        while True:
            try:
                chunk = await self._bounded(anext(iterator))
            except StopAsyncIteration:
                return
            n = tokens(chunk)
            if n > 0:
                now = time.monotonic()
                if self.tokens == 0:
                    self.pace.observe(self.prompt_tokens, now - self._started)
                self.tokens += n
                self._last = now
                if self.stage is not None:
                    report(self.stage, self.tokens, now - self._started)
            yield chunk


def estimated_tokens(text: str, chars_per_token: float) -> int:
    return math.ceil(len(text) / chars_per_token)
