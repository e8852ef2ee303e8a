"""Occasional clean-up of dead rows (expired cache entries, old rate-limit windows)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from provenance.logs import get_logger

log = get_logger("provenance.guards.sweep")


class Sweeper:
    """Runs `sweep` at most once per `every_s` per process. Dead rows are never wrong answers (reads
    already ignore them), so sweeping occasionally is plenty, and a failed sweep is logged, never raised:
    it must not fail the request it rides on."""

    def __init__(self, what: str, every_s: float, sweep: Callable[[], Awaitable[int]]) -> None:
        self.what = what
        self.every_s = every_s
        self.sweep = sweep
        self._last = float("-inf")

    async def maybe_run(self) -> None:
        now = time.monotonic()
        if now - self._last < self.every_s:
            return
        self._last = now
        try:
            deleted = await self.sweep()
        except Exception as exc:
            log.warning("clean-up failed", what=self.what, error=repr(exc))
            return
        if deleted:
            log.info("cleaned up", what=self.what, deleted=deleted)
