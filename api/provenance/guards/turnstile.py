"""Cloudflare Turnstile, verified server-side against siteverify; any doubt is a failure (fail closed)."""

from __future__ import annotations

import asyncio

import httpx
import msgspec

from provenance.logs import get_logger

log = get_logger("provenance.guards.turnstile")

# Cloudflare documents tokens as at most 2048 characters; anything longer can't be valid, so it is
# refused without spending a siteverify round trip on it.
MAX_TOKEN_CHARS = 2048


class SiteverifyReply(msgspec.Struct):
    success: bool
    error_codes: list[str] = msgspec.field(default_factory=list, name="error-codes")
    hostname: str | None = None


class TurnstileVerdict(msgspec.Struct, frozen=True):
    ok: bool
    detail: str


async def verify_turnstile(
    client: httpx.AsyncClient,
    verify_url: str,
    secret: str,
    token: str | None,
    remote_ip: str | None,
    timeout_s: float,
) -> TurnstileVerdict:
    """Ask siteverify about one token. Never raises: a timeout, network error or odd reply is a refusal."""
    if not token:
        return TurnstileVerdict(False, "no Turnstile token was sent")
    if len(token) > MAX_TOKEN_CHARS:
        return TurnstileVerdict(False, "the Turnstile token is too long to be valid")
    form = {"secret": secret, "response": token}
    if remote_ip and remote_ip != "unknown":
        form["remoteip"] = remote_ip
    try:
        # httpx's timeout bounds each phase separately; the outer one bounds the whole exchange.
        async with asyncio.timeout(timeout_s):
            response = await client.post(verify_url, data=form, timeout=timeout_s)
    except (TimeoutError, httpx.TimeoutException):
        log.warning("turnstile siteverify timed out", timeout_s=timeout_s)
        return TurnstileVerdict(False, f"siteverify did not answer within {timeout_s:g}s (fail closed)")
    except httpx.HTTPError as exc:
        # The exception text can include the URL but never the form body, so it is safe to log.
        log.warning("turnstile siteverify unreachable", error=type(exc).__name__)
        return TurnstileVerdict(False, "siteverify could not be reached (fail closed)")
    if response.status_code != 200:
        log.warning("turnstile siteverify http error", http_status=response.status_code)
        return TurnstileVerdict(False, f"siteverify answered HTTP {response.status_code} (fail closed)")
    try:
        reply = msgspec.json.decode(response.content, type=SiteverifyReply)
    except msgspec.DecodeError:
        log.warning("turnstile siteverify sent an unreadable reply")
        return TurnstileVerdict(False, "siteverify sent an unreadable reply (fail closed)")
    if not reply.success:
        codes = ", ".join(reply.error_codes) or "no error code"
        return TurnstileVerdict(False, f"Turnstile rejected the token ({codes})")
    return TurnstileVerdict(True, "Turnstile token verified")
