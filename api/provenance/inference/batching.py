"""A micro-batcher: the model inputs of concurrent requests, gathered over a few milliseconds, run as one
batch in a worker thread. Every ONNX session the service holds sits behind one (the embedder, and the
trained reader and verifier)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence
from typing import Any, Generic, TypeVar

Row = TypeVar("Row")


class MicroBatcher(Generic[Row]):
    """Gathers the rows of concurrent callers over `wait_s` into one call of `run`, made in a worker thread
    off the event loop, and hands each caller its own slice of the output back.

    On 2 cores one request's model work can't use the machine fully; several requests' rows in one run
    do, and the event loop stays free meanwhile. While a batch runs, new arrivals wait for the next one.
    `run` must return one output per row, in order, as anything that slices (a list, a numpy array).
    """

    def __init__(self, run: Callable[[list[Row]], Sequence[Any]], wait_s: float = 0.002, max_rows: int = 64) -> None:
        self.run = run
        self.wait_s = wait_s
        self.max_rows = max_rows
        self._pending: list[tuple[list[Row], asyncio.Future[Sequence[Any]]]] = []
        self._worker: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self.batches = 0  # runs made, for the benchmark's report
        self.rows = 0

    async def __call__(self, rows: list[Row]) -> Sequence[Any]:
        if not rows:
            return []
        loop = asyncio.get_running_loop()
        if loop is not self._loop:
            # A new event loop (a CLI command, a test): the old one's futures and worker are gone with it.
            self._loop, self._pending, self._worker = loop, [], None
        future: asyncio.Future[Sequence[Any]] = loop.create_future()
        self._pending.append((rows, future))
        if self._worker is None or self._worker.done():
            self._worker = loop.create_task(self._drain())
        return await future

    async def _drain(self) -> None:
        await asyncio.sleep(self.wait_s)
        while self._pending:
            batch: list[tuple[list[Row], asyncio.Future[Sequence[Any]]]] = []
            size = 0
            while self._pending and (not batch or size + len(self._pending[0][0]) <= self.max_rows):
                rows, future = self._pending.pop(0)
                batch.append((rows, future))
                size += len(rows)
            flat = [row for rows, _ in batch for row in rows]
            self.batches += 1
            self.rows += len(flat)
            try:
                out = await asyncio.to_thread(self.run, flat)
            except Exception as exc:
                for _, future in batch:
                    if not future.done():
                        future.set_exception(exc)
                continue
            at = 0
            for rows, future in batch:
                if not future.done():
                    future.set_result(out[at : at + len(rows)])
                at += len(rows)
