"""The write-behind batch the response log and the turn log share: bounded, never losing a batch to a failed
write, and one write at a time with the batch in flight still visible as waiting."""

from __future__ import annotations

import asyncio

from provenance.store.write_behind import WriteBehind


async def _nothing() -> None:
    return None


async def test_past_its_bound_the_oldest_rows_go_unkept_and_the_newest_are_written() -> None:
    written: list[list[int]] = []

    async def write(rows: list[int]) -> int:
        written.append(rows)
        return len(rows)

    batch = WriteBehind("test", write, flush_s=60, max_pending=3, after_write=_nothing)
    for row in range(5):
        batch.add([row])
    # What a caller holds aside counts too: two more waiting means two fewer rows, and none of the aside.
    assert batch.add([], also_waiting=2) == 0
    assert await batch.flush() == 1
    assert written == [[4]]
    await batch.aclose()


async def test_a_failed_write_keeps_its_rows_before_those_kept_meanwhile() -> None:
    attempts: list[list[str]] = []
    release = asyncio.Event()

    async def write(rows: list[str]) -> int:
        attempts.append(list(rows))
        if len(attempts) == 1:
            await release.wait()
            raise ConnectionError("database away")
        return len(rows)

    batch = WriteBehind("test", write, flush_s=60, max_pending=100, after_write=_nothing)
    batch.add(["a", "b"])
    first = asyncio.create_task(batch.flush())
    await asyncio.sleep(0)
    assert batch.writing == ["a", "b"]  # in flight: a reader still sees them waiting
    batch.add(["c"])
    release.set()
    assert await first == 0
    assert batch.writing == []
    assert await batch.flush() == 3
    assert attempts == [["a", "b"], ["a", "b", "c"]]
    await batch.aclose()


async def test_the_batch_writes_itself_every_flush_interval_and_prepares_rows_in_between() -> None:
    written: list[int] = []
    aside: list[int] = []
    prepared = 0

    async def write(rows: list[int]) -> int:
        written.extend(rows)
        return len(rows)

    async def prepare() -> None:
        nonlocal prepared
        prepared += 1
        batch.rows.extend(aside)
        aside.clear()

    batch = WriteBehind(
        "test", write, flush_s=0.05, max_pending=100, after_write=_nothing, prepare=prepare, prepare_every_s=0.01
    )
    aside.extend([1, 2])
    batch.add([])
    for _ in range(100):
        if written:
            break
        await asyncio.sleep(0.01)
    assert written == [1, 2]
    assert prepared >= 2  # between writes as well as before each
    await batch.aclose()
