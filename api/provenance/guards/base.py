"""The guard port: what the pipeline asks of bot check, rate limit, cache and spend cap.

`PostgresGuards` (api/provenance/guards/postgres.py) is the service's implementation; `NoGuards` is for in-process
runs that are not serving the public (evals, benchmarks of the pipeline alone) and says so in each stage.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Mapping, Sequence
from typing import Protocol

import msgspec

from provenance.access.clients import OPERATOR, Client
from provenance.ports import Profile, Usage
from provenance.text import normalise_question
from provenance.wire import AskResponse, BotCheckStage, CacheStage, RateLimitStage, SpendStage


class BotCheckResult(msgspec.Struct):
    stage: BotCheckStage
    client_key: str | None = None  # "key:<name>" when an API key authenticated the caller
    unauthorized: bool = False  # a bad API key is a 401-class failure, not a bot verdict
    # Who asks and what they may read; None when the check failed. Checked before any corpus is looked up.
    client: Client | None = None


class Ticket(msgspec.Struct, frozen=True):
    """What a refund needs: the key a request was counted under, and the window it was counted in."""

    key: str
    window_start: dt.datetime


class RateLimitResult(msgspec.Struct):
    stage: RateLimitStage
    ticket: Ticket | None = None  # set when the request was counted


class CacheResult(msgspec.Struct):
    stage: CacheStage
    response: AskResponse | None = None


class Reservation(msgspec.Struct):
    stage: SpendStage
    day: str | None = None
    reserved_usd: float = 0.0
    # For a profile that declares no paid calls: they are still counted at settle time, at no cost.
    free: bool = False


def cache_key(question: str, corpus_version: str | None, settings_fingerprint: str) -> str:
    material = f"{normalise_question(question)}\0{corpus_version or '-'}\0{settings_fingerprint}"
    return hashlib.sha256(material.encode()).hexdigest()


class Guards(Protocol):
    def client_ip(self, peer_ip: str | None, headers: Mapping[str, str]) -> str: ...

    async def bot_check(
        self, turnstile_token: str | None, authorization: str | None, peer_ip: str | None
    ) -> BotCheckResult: ...

    async def rate_limit(self, client_key: str, *, count: bool = True) -> RateLimitResult: ...

    async def rate_limit_refund(self, result: RateLimitResult) -> None: ...

    def cache_key(self, question: str, corpus_version: str | None, settings_fingerprint: str) -> str: ...

    async def cache_get(self, key: str) -> CacheResult: ...

    async def cache_put(self, key: str, question: str, response: AskResponse) -> None: ...

    async def spend_reserve(self, profile: Profile) -> Reservation: ...

    async def spend_settle(self, reservation: Reservation, usages: Sequence[Usage]) -> SpendStage: ...

    async def aclose(self) -> None:
        """Release what the guards hold (an HTTP client, say) before the event loop closes."""


class NoGuards:
    """Every guard off, and every stage saying so. The caller reads every corpus, as the operator does:
    this is for runs on the server itself, never for serving the public."""

    _why = "not applied: in-process run without guards"

    def client_ip(self, peer_ip: str | None, headers: Mapping[str, str]) -> str:
        return peer_ip or "unknown"

    async def bot_check(
        self, turnstile_token: str | None, authorization: str | None, peer_ip: str | None
    ) -> BotCheckResult:
        return BotCheckResult(BotCheckStage(detail=self._why), client=OPERATOR)

    async def rate_limit(self, client_key: str, *, count: bool = True) -> RateLimitResult:
        return RateLimitResult(RateLimitStage(detail=self._why))

    async def rate_limit_refund(self, result: RateLimitResult) -> None:
        return None

    def cache_key(self, question: str, corpus_version: str | None, settings_fingerprint: str) -> str:
        return cache_key(question, corpus_version, settings_fingerprint)

    async def cache_get(self, key: str) -> CacheResult:
        return CacheResult(CacheStage(detail=self._why))

    async def cache_put(self, key: str, question: str, response: AskResponse) -> None:
        return None

    async def spend_reserve(self, profile: Profile) -> Reservation:
        return Reservation(SpendStage(detail=self._why))

    async def spend_settle(self, reservation: Reservation, usages: Sequence[Usage]) -> SpendStage:
        return reservation.stage

    async def aclose(self) -> None:
        return None  # holds nothing
