"""POST /feedback's work: the bot check /ask has, a rate limit of its own, who the client is (an HMAC, never
the address), and the verdict kept against the response it rates."""

from __future__ import annotations

import hashlib
import hmac
import math
import secrets
from collections.abc import Mapping

from provenance import metrics
from provenance.access.store import AccessStore
from provenance.errors import ServiceError, UnknownRequest
from provenance.feedback.responses import ResponseLog
from provenance.feedback.schema import FeedbackReceipt, FeedbackRequest, WrongVerdict
from provenance.guards.base import Guards
from provenance.guards.ratelimit import human_duration, rate_limit_key, spend_hourly
from provenance.settings import Settings
from provenance.store import Store


def _days(seconds: int) -> str:
    hours = math.ceil(seconds / 3600)
    if hours < 48:
        return f"{hours} hours"
    return f"{math.ceil(seconds / 86_400)} days"


class FeedbackDesk:
    def __init__(self, settings: Settings, store: Store, guards: Guards, responses: ResponseLog) -> None:
        self.settings = settings.feedback
        self.store = store
        self.guards = guards
        self.responses = responses
        self.access = AccessStore(store.pool, store.acquire_timeout_s)
        self._key: bytes | None = settings.feedback.hmac_key.encode() if settings.feedback.hmac_key else None

    async def client_hash(self, client_key: str) -> str:
        """The client as the feedback table knows it. IPv6 addresses count per /64, as the rate limit does:
        one subscriber, one client."""
        if self._key is None:
            self._key = await self.store.feedback_secret(secrets.token_bytes(32))
        identity, _ = rate_limit_key(client_key)
        return hmac.new(self._key, identity.encode(), hashlib.sha256).hexdigest()[:32]

    async def submit(
        self, verdict: FeedbackRequest, *, peer_ip: str | None, headers: Mapping[str, str]
    ) -> FeedbackReceipt:
        client_ip = self.guards.client_ip(peer_ip, headers)
        bot = await self.guards.bot_check(verdict.turnstile_token, headers.get("authorization"), client_ip)
        if bot.stage.status == "blocked":
            if bot.unauthorized:
                raise ServiceError(
                    401,
                    "invalid_api_key",
                    bot.stage.detail or "unknown or revoked API key",
                    {"WWW-Authenticate": 'Bearer error="invalid_token"'},
                )
            raise ServiceError(403, "bot_check_failed", f"the bot check failed: {bot.stage.detail or 'no token'}")
        client = await self.client_hash(bot.client_key or client_ip)
        await self._count(client)
        # This worker's responses written now, so one rated at once is found (another worker's are written
        # within FEEDBACK_FLUSH_MS: the page asks again after a 404).
        await self.responses.flush()
        kind = verdict.kind if isinstance(verdict, WrongVerdict) else None
        note = verdict.note or ""
        window_s = self.settings.window_s
        unknown = UnknownRequest(verdict.request_id, human_duration(window_s) if window_s < 3600 else _days(window_s))
        # An answer from a corpus this client may not read is one it can't know of: the same 404 as no answer.
        # (A response's corpus never changes, so the look and the rating need no transaction.)
        corpus = await self.access.response_corpus(verdict.request_id)
        if corpus is not None and (bot.client is None or not bot.client.reads(corpus)):
            raise unknown
        rated = await self.store.rate(verdict.request_id, client, verdict.verdict, kind, note, window_s)
        if rated is None:
            raise unknown
        metrics.feedback_given(rated.status, verdict.verdict, kind)
        return FeedbackReceipt(
            request_id=verdict.request_id,
            verdict=verdict.verdict,
            kind=kind,
            note=note,
            replaced=rated.replaced,
            rated_at=rated.rated_at.isoformat(),
        )

    async def _count(self, client: str) -> None:
        await spend_hourly(
            self.store,
            f"feedback:{client}",
            self.settings.rate_limit_per_hour,
            "rating",
            "FEEDBACK_RATE_LIMIT_PER_HOUR",
        )
