"""The service's guards: Turnstile or API key, rate limit, cache and spend cap, all kept in Postgres."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import httpx

from provenance.access.identify import anonymous
from provenance.access.store import AccessStore
from provenance.guards.apikeys import bearer_token, check_key
from provenance.guards.base import BotCheckResult, CacheResult, NoGuards, RateLimitResult, Reservation, cache_key
from provenance.guards.cache import AnswerCache
from provenance.guards.ratelimit import RateLimiter, client_ip, parse_networks
from provenance.guards.spend import SpendCap
from provenance.guards.turnstile import verify_turnstile
from provenance.ports import Profile, Usage
from provenance.settings import Settings
from provenance.store.guards import GuardStore
from provenance.timing import Timer
from provenance.wire import AskResponse, BotCheckStage, SpendStage


class PostgresGuards:
    def __init__(self, settings: Settings, store: GuardStore) -> None:
        self.settings = settings
        self.store = store
        self.access = AccessStore(store.pool, store.acquire_timeout_s)
        self.proxies = parse_networks(settings.guards.trusted_proxies)
        self.limiter = RateLimiter(
            store, settings.guards.rate_limit_per_hour, settings.guards.rate_limit_per_hour_api_key
        )
        self.cache = AnswerCache(store, settings.guards.cache_ttl_s)
        self.spend = SpendCap(store, settings)
        self._http: httpx.AsyncClient | None = None

    def _client(self) -> httpx.AsyncClient:
        # Created on first use, inside the serving event loop, and shared so siteverify calls reuse
        # connections instead of paying a TLS handshake per question.
        if self._http is None:
            self._http = httpx.AsyncClient(
                timeout=self.settings.guards.turnstile_timeout_s,
                limits=httpx.Limits(max_connections=50, max_keepalive_connections=10),
                follow_redirects=False,
            )
        return self._http

    async def aclose(self) -> None:
        if self._http is not None:
            await self._http.aclose()
            self._http = None

    def client_ip(self, peer_ip: str | None, headers: Mapping[str, str]) -> str:
        return client_ip(peer_ip, headers, self.proxies)

    async def bot_check(
        self, turnstile_token: str | None, authorization: str | None, peer_ip: str | None
    ) -> BotCheckResult:
        """`peer_ip` is the client address as `client_ip` resolved it; Turnstile gets it as remoteip."""
        timer = Timer()
        key = bearer_token(authorization)
        if key is not None:
            checked = await check_key(self.access, key)
            if not checked.ok:
                stage = BotCheckStage(status="blocked", ms=timer.ms, detail=checked.detail, method="api_key")
                return BotCheckResult(stage, unauthorized=True)
            stage = BotCheckStage(status="ok", ms=timer.ms, detail=checked.detail, method="api_key")
            return BotCheckResult(stage, client_key=f"key:{checked.name}", client=checked.client)
        secret = self.settings.guards.turnstile_secret_key
        if not secret:
            stage = BotCheckStage(detail="TURNSTILE_SECRET_KEY is not set")
            return BotCheckResult(stage, client=await anonymous(self.access))
        verdict = await verify_turnstile(
            self._client(),
            self.settings.guards.turnstile_verify_url,
            secret,
            turnstile_token,
            peer_ip,
            self.settings.guards.turnstile_timeout_s,
        )
        stage = BotCheckStage(
            status="ok" if verdict.ok else "blocked", ms=timer.ms, detail=verdict.detail, method="turnstile"
        )
        return BotCheckResult(stage, client=await anonymous(self.access) if verdict.ok else None)

    async def rate_limit(self, client_key: str, *, count: bool = True) -> RateLimitResult:
        stage, ticket = await self.limiter.check(client_key, count=count)
        return RateLimitResult(stage, ticket)

    async def rate_limit_refund(self, result: RateLimitResult) -> None:
        if result.ticket is not None:
            await self.limiter.refund(result.ticket)

    def cache_key(self, question: str, corpus_version: str | None, settings_fingerprint: str) -> str:
        return cache_key(question, corpus_version, settings_fingerprint)

    async def cache_get(self, key: str) -> CacheResult:
        stage, response = await self.cache.get(key)
        return CacheResult(stage, response)

    async def cache_put(self, key: str, question: str, response: AskResponse) -> None:
        await self.cache.put(key, question, response)

    async def spend_reserve(self, profile: Profile) -> Reservation:
        return await self.spend.reserve(profile)

    async def spend_settle(self, reservation: Reservation, usages: Sequence[Usage]) -> SpendStage:
        return await self.spend.settle(reservation, usages)


class OperatorGuards(PostgresGuards):
    """For commands an operator runs on the server (`provenance warm-cache`): the cache and the spend
    cap apply as for anyone, but there is no bot to check and no client to rate-limit."""

    _why = "not applied: operator command run on the server"

    # The same "not applied" stages as NoGuards, each saying this class's reason.
    bot_check = NoGuards.bot_check
    rate_limit = NoGuards.rate_limit
    rate_limit_refund = NoGuards.rate_limit_refund
