"""What every call through a model SDK (anthropic's, openai's) shares, whoever makes it (a profile's ports or
the reading judge): its failures mapped onto `ModelError`, and the usage a chat completion reports.

Its own module, apart from the profiles and the judges, because both import it: the judge is built with the
verifier (`provenance.claims`), which the profiles build.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NamedTuple

from provenance.errors import ModelError
from provenance.inference.streamed_calls import Watch
from provenance.logs import get_logger
from provenance.ports import Usage

log = get_logger("provenance.inference.sdk")
# The HTTP stacks under the SDKs (httpx, and httpx2, its fork, which both SDKs now use): their errors' words are
# safe to log.
_TRANSPORTS = {"httpx", "httpcore", "httpx2", "httpcore2"}

# A server that reports no token counts is booked at an estimate: characters over this, rounded up (about
# four characters a token in English; three errs toward the cap).
CHARS_PER_TOKEN_ESTIMATE = 3


class SdkErrors(NamedTuple):
    """A model SDK's exception classes (the anthropic and openai SDKs have the same four)."""

    timeout: type[Exception]  # a kind of connection error in both SDKs, so it is asked first
    status: type[Exception]  # carries status_code
    connection: type[Exception]
    base: type[Exception]


def _from_transport(cls: type) -> bool:
    return cls.__module__.split(".")[0] in _TRANSPORTS


def _transport_error(exc: BaseException, base: str) -> bool:
    """Whether `exc` is an HTTP stack's `base` (httpx's class names, which its fork keeps): matched by name,
    so neither stack need be the one installed."""
    return any(cls.__name__ == base and _from_transport(cls) for cls in type(exc).__mro__)


def sdk_failure(exc: Exception, errors: SdkErrors, *, what: str, call: str, server: str) -> ModelError | None:
    """The ModelError a failed SDK call is, or None for an exception that is no model failure. Messages name
    the failure only: SDK errors can carry response bodies and the server's address, and none of it helps a
    caller. `server` is what the caller calls the other end ("model API", "model server")."""
    if isinstance(exc, errors.timeout):
        return ModelError(f"{what}: the {server} did not answer in time", call=call, kind="timeout")
    if isinstance(exc, errors.status):
        status = getattr(exc, "status_code", "?")
        return ModelError(f"{what}: the {server} answered HTTP {status}", call=call, kind="http_status")
    if isinstance(exc, errors.connection):
        return ModelError(f"{what}: could not reach the {server}", call=call, kind="connection")
    if isinstance(exc, errors.base):
        return ModelError(f"{what}: the model call failed ({type(exc).__name__})", call=call)
    # A stream's body is read after the SDK has handed it over: what breaks then is the HTTP stack's,
    # unwrapped (httpx's, or httpx2's, the fork both SDKs now send through).
    if _transport_error(exc, "TimeoutException"):
        return ModelError(f"{what}: the {server} did not answer in time", call=call, kind="timeout")
    if _transport_error(exc, "TransportError"):
        return ModelError(f"{what}: the connection to the {server} broke off", call=call, kind="connection")
    if isinstance(exc, ValueError):
        # Both SDKs let a body that isn't JSON at all (a proxy's HTML error page) escape as JSONDecodeError.
        return ModelError(f"{what}: the {server} sent an unreadable response", call=call, kind="malformed")
    return None


@contextmanager
def sdk_failures(errors: SdkErrors, *, what: str, call: str, server: str, watch: Watch | None = None) -> Iterator[None]:
    """Around one SDK call: its failures raised as the ModelError they are (`sdk_failure`), any other
    exception as it is. Only a malformed reply keeps the SDK's exception as its cause: the others' can
    carry response bodies. A streamed call's `watch` tells a connection lost mid-answer (which the SDKs
    raise as one they could not make) from one never made."""
    try:
        yield
    except Exception as exc:
        failure = sdk_failure(exc, errors, what=what, call=call, server=server)
        if failure is None:
            raise
        if watch is not None and watch.tokens and failure.kind == "connection":
            failure = watch.broke_off()
        # The wire's detail names the failure only; an operator needs to know what broke underneath.
        log.warning("model_call_failed", call=call, kind=failure.kind, error=failure_chain(exc))
        raise failure from (exc if failure.kind == "malformed" else None)


def failure_chain(exc: BaseException) -> str:
    """What broke, outermost first: each exception's class, and the transport's own words where it is
    the transport's or the socket's ("Server disconnected without sending a response"), which carry no
    response body. An SDK's own messages are left out: they can quote the response."""
    parts: list[str] = []
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        name = type(current).__name__
        if (isinstance(current, OSError) or _from_transport(type(current))) and str(current):
            name = f"{name}: {current}"
        parts.append(name)
        current = current.__cause__ or current.__context__
    return " <- ".join(parts)


def chat_usage(model: str, response: Any, prompt: str, max_tokens: int) -> Usage:
    """What a chat completion cost, as the server reports it; a server that reports no usage is booked at an
    estimate that errs toward the spend cap (the prompt's characters, and every output token allowed)."""
    u = getattr(response, "usage", None)
    if u is None or not isinstance(u.prompt_tokens, int) or not isinstance(u.completion_tokens, int):
        return Usage(
            model=model, input_tokens=math.ceil(len(prompt) / CHARS_PER_TOKEN_ESTIMATE), output_tokens=max_tokens
        )
    return Usage(model=model, input_tokens=u.prompt_tokens, output_tokens=u.completion_tokens)
