"""Admission control on its own: slots, the bounded queue, its deadline, and a waiter that gives up."""

from __future__ import annotations

import asyncio

import pytest

from provenance.errors import Overloaded, SettingsError
from provenance.pipeline.admission import Admission
from provenance.settings import load_settings


async def _hold(
    admission: Admission, started: asyncio.Event, release: asyncio.Event, log: list[str], name: str
) -> None:
    async with admission.slot():
        log.append(name)
        started.set()
        await release.wait()


async def test_a_full_house_queues_in_order_then_turns_away() -> None:
    admission = Admission(limit=1, queue_max=2, wait_s=5.0)
    release = asyncio.Event()
    log: list[str] = []
    first = asyncio.Event()
    holder = asyncio.create_task(_hold(admission, first, release, log, "a"))
    await first.wait()
    waiters = [asyncio.create_task(_hold(admission, asyncio.Event(), release, log, n)) for n in ("b", "c")]
    await asyncio.sleep(0)
    assert admission.running == 1 and admission.waiting == 2
    # The queue is full: a fourth is turned away at once, with a Retry-After.
    with pytest.raises(Overloaded) as refused:
        async with admission.slot():
            pass
    assert refused.value.status == 503 and refused.value.code == "overloaded"
    assert refused.value.headers["Retry-After"] == "5"
    release.set()
    await asyncio.gather(holder, *waiters)
    assert log == ["a", "b", "c"]  # first come, first served
    assert admission.running == 0 and admission.waiting == 0


async def test_a_wait_past_the_deadline_is_overloaded_and_leaves_the_queue() -> None:
    admission = Admission(limit=1, queue_max=4, wait_s=0.05)
    release, started = asyncio.Event(), asyncio.Event()
    holder = asyncio.create_task(_hold(admission, started, release, [], "a"))
    await started.wait()
    with pytest.raises(Overloaded, match=r"within 0\.05s"):
        async with admission.slot():
            pass
    assert admission.waiting == 0
    release.set()
    await holder
    # The slot is free again for the next one, with no wait.
    async with admission.slot() as waited_s:
        assert admission.running == 1
    assert waited_s < 0.05 and admission.running == 0


async def test_a_cancelled_waiter_gives_its_place_up() -> None:
    admission = Admission(limit=1, queue_max=4, wait_s=5.0)
    release, started = asyncio.Event(), asyncio.Event()
    log: list[str] = []
    holder = asyncio.create_task(_hold(admission, started, release, log, "a"))
    await started.wait()
    gone = asyncio.create_task(_hold(admission, asyncio.Event(), release, log, "gone"))
    stays = asyncio.create_task(_hold(admission, asyncio.Event(), release, log, "stays"))
    await asyncio.sleep(0)
    gone.cancel()
    with pytest.raises(asyncio.CancelledError):
        await gone
    assert admission.waiting == 1
    release.set()
    await asyncio.gather(holder, stays)
    assert log == ["a", "stays"] and admission.running == 0


def test_the_admission_settings_are_validated() -> None:
    assert load_settings({"ASK_CONCURRENCY": "3", "ASK_QUEUE_MAX": "0"}).server.ask_concurrency == 3
    assert load_settings({}).server.ask_concurrency >= 1  # the cores this process may use
    for env, message in [
        ({"ASK_CONCURRENCY": "0"}, "ASK_CONCURRENCY"),
        ({"ASK_QUEUE_MAX": "-1"}, "ASK_QUEUE_MAX"),
        ({"ASK_QUEUE_TIMEOUT_S": "0"}, "ASK_QUEUE_TIMEOUT_S"),
    ]:
        with pytest.raises(SettingsError, match=message):
            load_settings(env)
