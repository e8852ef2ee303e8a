"""A write-behind batch: rows kept in memory by the request that made them, written by a task of the batch's
own every few hundred milliseconds in one transaction, so that no request waits for its row's write. What the
response log (provenance.feedback.responses) and the turn log (provenance.conversations.log) share.

What waits is bounded (the oldest go unkept past `max_pending`), a failed write keeps its rows for the next,
one write runs at a time (so a row is never written before one kept earlier), and the rows being written are
still waiting for a reader (`waiting`) until their write commits. What waits is lost if the process dies
before the next write; shutdown (`aclose`) writes it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable
from typing import Generic, TypeVar

from provenance.logs import get_logger

log = get_logger("provenance.store.write_behind")

Row = TypeVar("Row")


class WriteBehind(Generic[Row]):
    """`write` stores one batch and says how many rows it kept, and `after_write` follows each write (a
    sweep of expired rows); `prepare`, run before each write and between
    writes every `prepare_every_s`, turns what a caller left aside into rows (the response log encodes them
    early, so that they die young; see there)."""

    def __init__(
        self,
        what: str,
        write: Callable[[list[Row]], Awaitable[int]],
        *,
        flush_s: float,
        max_pending: int,
        after_write: Callable[[], Awaitable[None]],
        prepare: Callable[[], Awaitable[None]] | None = None,
        prepare_every_s: float | None = None,
    ) -> None:
        self.what = what
        self._write = write
        self.flush_s = flush_s
        self.max_pending = max_pending
        self._after_write = after_write
        self._prepare = prepare
        self._tick_s = prepare_every_s or flush_s
        self._rows: list[Row] = []
        # The batch being written: still waiting, for a reader, until its write commits.
        self.writing: list[Row] = []
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self._dropped = 0

    @property
    def rows(self) -> list[Row]:
        """What waits for the next write (not the batch being written)."""
        return self._rows

    def add(self, rows: Iterable[Row], *, also_waiting: int = 0) -> int:
        """Rows to write, in the request's task, never waiting. `also_waiting`: what the caller holds aside to
        become rows, counted against the bound; says how many of those the caller must drop, the oldest."""
        self._rows.extend(rows)
        drop = self.trim(also_waiting)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=self.what)
        return drop

    def trim(self, also_waiting: int = 0) -> int:
        """Drop the oldest rows past the bound; how many more the caller must drop from what it holds aside."""
        over = len(self._rows) + also_waiting - self.max_pending
        if over <= 0:
            return 0
        rows = min(over, len(self._rows))
        del self._rows[:rows]
        self._dropped += over
        return over - rows

    async def _run(self) -> None:
        loop = asyncio.get_running_loop()
        written = loop.time()
        while True:
            await asyncio.sleep(self._tick_s)
            if self._prepare is not None:
                await self._prepare()
            if loop.time() - written >= self.flush_s:
                written = loop.time()
                await self.flush()

    async def flush(self) -> int:
        """Write what waits, now; a failed write keeps it for the next (up to the bound)."""
        async with self._lock:
            if self._prepare is not None:
                await self._prepare()
            if not self._rows:
                return 0
            batch, self._rows = self._rows, []
            self.writing = batch
            try:
                kept = await self._write(batch)
            except BaseException as exc:
                # Kept for the next write, the oldest first; a cancelled write (shutdown) too, for aclose's.
                self._rows[:0] = batch
                self.trim()
                if not isinstance(exc, Exception):
                    raise
                log.warning("could not write; retrying", what=self.what, error=repr(exc), rows=len(batch))
                return 0
            finally:
                self.writing = []
        if self._dropped:
            log.warning("rows not kept: too many waited for the database", what=self.what, dropped=self._dropped)
            self._dropped = 0
        await self._after_write()
        return kept

    async def aclose(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        await self.flush()
