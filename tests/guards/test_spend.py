"""The daily spend cap: atomic reservations, settling with metered cost, refunds, the local profile."""

from __future__ import annotations

import asyncio

import pytest
from anthropic import AsyncAnthropic

from provenance.guards.spend import SpendCap, request_estimate_usd, utc_day
from provenance.inference.pricing import cost_usd, max_call_cost_usd
from provenance.ports import Profile, Usage
from provenance.profiles.anthropic import build_anthropic_models
from provenance.settings import Settings
from provenance.store import Store

# Only the name and the worst case matter to the spend cap; the model objects are never called here. The
# paid one declares the anthropic profile's own worst case (its client is never used).
ANTHROPIC = build_anthropic_models(Settings(), AsyncAnthropic(api_key="unused"))
PAID = Profile(
    name="anthropic",
    screener=None,
    generator=None,
    verifier=None,
    worst_case=ANTHROPIC.worst_case,
    screener_reads_passages=False,
    decompose_and_verify=object(),
)
LOCAL = Profile(
    name="local",
    screener=None,
    generator=None,
    verifier=None,
    worst_case=None,
    screener_reads_passages=True,
    decomposer=object(),
)
CALL = Usage(model="claude-haiku-4-5", input_tokens=1000, output_tokens=200)  # $0.002


def test_the_estimate_is_three_worst_case_calls() -> None:
    # Screening, generation and the combined decompose-and-verify call; the verifier is local.
    settings = Settings()
    estimate = request_estimate_usd(PAID, settings)
    per_call = max_call_cost_usd("claude-haiku-4-5", 2000 + 4 * 256 * 3 // 2, 1536)
    assert estimate == pytest.approx(3 * per_call)
    # A real request of the anthropic profile, at its max_tokens, never costs more than that.
    assert estimate > 3 * cost_usd(Usage(model="claude-haiku-4-5", input_tokens=3000, output_tokens=1536))


async def test_concurrent_reservations_never_overshoot_by_more_than_one_request(fresh_store: Store) -> None:
    settings = Settings().with_overrides(daily_budget_usd=1.0)
    cap = SpendCap(fresh_store, settings)
    estimate = request_estimate_usd(PAID, settings)
    already = round(1.0 - 2.5 * estimate, 6)
    await fresh_store.spend_settle(utc_day(), 0.0, already, 0)

    reservations = await asyncio.gather(*(cap.reserve(PAID) for _ in range(50)))
    admitted = [r for r in reservations if r.stage.status == "ok"]
    refused = [r for r in reservations if r.stage.status == "blocked"]
    # 2.5 estimates of room: admitted at 1.5 and 0.5 left, and at -0.5 nothing more.
    assert len(admitted) == 3 and len(refused) == 47
    ledger = await fresh_store.spend_day(utc_day())
    assert ledger is not None
    held = ledger.spent_usd + ledger.reserved_usd
    assert settings.guards.daily_budget_usd < held <= settings.guards.daily_budget_usd + estimate
    for r in refused:
        assert r.reserved_usd == 0.0 and r.day is None
        assert r.stage.budget_usd == 1.0 and r.stage.spent_usd == pytest.approx(already)

    # Settling books the metered cost and releases every hold.
    stages = await asyncio.gather(*(cap.settle(r, [CALL, CALL]) for r in reservations))
    ledger = await fresh_store.spend_day(utc_day())
    assert ledger is not None
    assert ledger.reserved_usd == 0.0
    assert ledger.spent_usd == pytest.approx(already + 3 * 2 * 0.002, abs=1e-6)
    assert ledger.calls == 3 * 2
    assert sorted(s.charged_usd or 0.0 for s in stages)[-3:] == [0.004, 0.004, 0.004]


async def test_a_failed_request_is_refunded(fresh_store: Store) -> None:
    cap = SpendCap(fresh_store, Settings().with_overrides(daily_budget_usd=1.0))
    reservation = await cap.reserve(PAID)
    assert reservation.stage.status == "ok" and reservation.reserved_usd > 0
    during = await fresh_store.spend_day(utc_day())
    assert during is not None and during.reserved_usd == pytest.approx(reservation.reserved_usd)
    # The screening call was billed, then generation failed and reported nothing.
    stage = await cap.settle(reservation, [CALL])
    after = await fresh_store.spend_day(utc_day())
    assert after is not None and after.reserved_usd == 0.0
    assert after.spent_usd == pytest.approx(0.002) and stage.charged_usd == pytest.approx(0.002)


async def test_zero_budget_refuses_every_paid_request(fresh_store: Store) -> None:
    reservation = await SpendCap(fresh_store, Settings().with_overrides(daily_budget_usd=0.0)).reserve(PAID)
    assert reservation.stage.status == "blocked" and reservation.day is None
    assert await fresh_store.spend_day(utc_day()) is None


async def test_the_local_profile_reserves_nothing_but_its_calls_are_counted(fresh_store: Store) -> None:
    cap = SpendCap(fresh_store, Settings().with_overrides(daily_budget_usd=0.0))  # even with no budget at all
    reservation = await cap.reserve(LOCAL)
    assert reservation.stage.status == "ok" and reservation.stage.estimate_usd == 0.0
    assert await fresh_store.spend_day(utc_day()) is None
    local = [Usage(model="local-extractive", input_tokens=500, output_tokens=50)] * 3
    stage = await cap.settle(reservation, local)
    assert stage.status == "ok" and stage.charged_usd == 0.0 and stage.spent_usd == 0.0
    ledger = await fresh_store.spend_day(utc_day())
    assert ledger is not None and ledger.calls == 3 and ledger.spent_usd == 0.0
