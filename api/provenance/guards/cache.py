"""The answer cache: whole AskResponse documents in Postgres, keyed by question, corpus and settings."""

from __future__ import annotations

import msgspec

from provenance.guards.sweep import Sweeper
from provenance.logs import get_logger
from provenance.store.guards import GuardStore
from provenance.timing import Timer
from provenance.wire import AskResponse, CacheStage

log = get_logger("provenance.guards.cache")

CLEANUP_EVERY_S = 600.0

_decoder = msgspec.json.Decoder(AskResponse)
_encoder = msgspec.json.Encoder()


class AnswerCache:
    def __init__(self, store: GuardStore, ttl_s: int) -> None:
        self.store = store
        self.ttl_s = ttl_s
        self._sweeper = Sweeper("answer cache", CLEANUP_EVERY_S, store.cache_cleanup)

    @property
    def enabled(self) -> bool:
        return self.ttl_s > 0

    async def get(self, key: str) -> tuple[CacheStage, AskResponse | None]:
        if not self.enabled:
            return CacheStage(detail="disabled: CACHE_TTL_S is 0"), None
        timer = Timer()
        row = await self.store.cache_get(key)
        if row is None:
            return CacheStage(status="miss", ms=timer.ms), None
        try:
            response = _decoder.decode(row.response)
        except msgspec.DecodeError as exc:
            # A row written by an older AskResponse shape: treat it as absent, and let the fresh
            # answer overwrite it.
            log.warning("unreadable cache entry ignored", error=str(exc))
            return CacheStage(status="miss", ms=timer.ms, detail="stored entry unreadable; recomputed"), None
        return CacheStage(status="hit", ms=timer.ms, cached_at=row.created_at.isoformat()), response

    async def put(self, key: str, question: str, response: AskResponse) -> None:
        if not self.enabled or response.status == "blocked":
            return
        await self.store.cache_put(key, question, _encoder.encode(response).decode(), self.ttl_s, response.corpus)
        await self._sweeper.maybe_run()
