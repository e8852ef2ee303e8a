"""Admission control for the expensive part of /ask: at most `limit` pipelines run at once, at most
`queue_max` more wait for a slot (first come, first served), and none waits longer than `wait_s`.

Without it every request started its pipeline at once: on a small machine 64 of them shared the CPU,
each took seconds, and their database waits ran out as if Postgres were down. Past the bound a client
gets an honest `503 overloaded` with Retry-After instead, while cached answers and cheap rejections,
which never come here, keep being served.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager

from provenance.errors import Overloaded


class Admission:
    def __init__(
        self, limit: int, queue_max: int, wait_s: float, on_change: Callable[[int, int], None] | None = None
    ) -> None:
        self.limit = limit
        self.queue_max = queue_max
        self.wait_s = wait_s
        self.running = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        # Told (running, waiting) whenever either changes: the metrics' gauges, which a scrape in another
        # worker process can't read from this object.
        self._on_change = on_change or _ignore

    def _changed(self) -> None:
        self._on_change(self.running, len(self._waiters))

    @property
    def waiting(self) -> int:
        return len(self._waiters)

    @property
    def retry_after_s(self) -> int:
        return max(1, math.ceil(self.wait_s))

    @asynccontextmanager
    async def slot(self) -> AsyncIterator[float]:
        """Hold one pipeline slot for the body; yields the seconds spent waiting for it."""
        started = time.perf_counter()
        await self._acquire()
        try:
            yield time.perf_counter() - started
        finally:
            self._release()

    async def _acquire(self) -> None:
        if self.running < self.limit and not self._waiters:
            self.running += 1
            self._changed()
            return
        if len(self._waiters) >= self.queue_max:
            raise Overloaded(
                f"the service is busy: {self.running} questions are being answered and {len(self._waiters)}"
                " are waiting; try again shortly",
                self.retry_after_s,
            )
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        self._changed()
        try:
            await asyncio.wait_for(asyncio.shield(waiter), self.wait_s)
        except BaseException as exc:
            if waiter.done() and not waiter.cancelled():
                # The slot was handed over just as the wait ended: pass it on to the next in line.
                self._release()
            else:
                waiter.cancel()
                self._waiters.remove(waiter)
                self._changed()
            if isinstance(exc, TimeoutError):
                raise Overloaded(
                    f"the service is busy: no answer could start within {self.wait_s:g}s; try again shortly",
                    self.retry_after_s,
                ) from None
            raise

    def _release(self) -> None:
        # A finished pipeline hands its slot straight to the oldest waiter, so `running` stays the same.
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                self._changed()
                return
        self.running -= 1
        self._changed()


def _ignore(running: int, waiting: int) -> None:
    return None
