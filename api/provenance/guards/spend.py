"""The daily spend cap: reserve a request's worst-case cost before any paid call, settle after.

The ledger keeps settled spend and reservations in flight apart, so the cap holds across concurrent
requests and workers: a reservation is admitted only while settled + reserved is under the budget, in
one statement, so the day can exceed the budget by at most one request's worst case.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import msgspec

from provenance.guards.base import Reservation
from provenance.inference.pricing import cost_usd, price_table
from provenance.logs import get_logger
from provenance.ports import Profile, Usage
from provenance.settings import Settings
from provenance.store.guards import GuardStore
from provenance.timing import Timer
from provenance.wire import SpendStage

log = get_logger("provenance.guards.spend")


def utc_day() -> dt.date:
    return dt.datetime.now(dt.UTC).date()


def request_estimate_usd(profile: Profile, settings: Settings) -> float:
    """The most one request can cost, the amount held against the budget while it runs: the profile's own
    worst case, over as many passage tokens as retrieval can return."""
    if profile.worst_case is None:
        return 0.0
    passage_tokens = settings.retrieval.k * settings.ingest.chunk_max_tokens
    prices = price_table(settings)
    return round(sum(cost_usd(call, prices) for call in profile.worst_case(passage_tokens)), 6)


class SpendCap:
    def __init__(self, store: GuardStore, settings: Settings) -> None:
        self.store = store
        self.settings = settings
        self.budget_usd = settings.guards.daily_budget_usd
        self.prices = price_table(settings)

    async def reserve(self, profile: Profile) -> Reservation:
        timer = Timer()
        day = utc_day()
        if not profile.paid:
            # Nothing to hold back, but the calls are still booked at settle time.
            stage = SpendStage(
                status="ok",
                detail=f"profile {profile.name} makes no paid calls",
                budget_usd=self.budget_usd,
                estimate_usd=0.0,
            )
            stage.ms = timer.ms
            return Reservation(stage, day=day.isoformat(), reserved_usd=0.0, free=True)
        estimate = request_estimate_usd(profile, self.settings)
        row = await self.store.spend_reserve(day, estimate, self.budget_usd)
        if row is None:
            today = await self.store.spend_day(day)
            spent = today.spent_usd if today else 0.0
            held = today.reserved_usd if today else 0.0
            return Reservation(
                SpendStage(
                    status="blocked",
                    ms=timer.ms,
                    detail=(
                        f"today's budget of ${self.budget_usd:.2f} is spent "
                        f"(${spent:.4f} settled, ${held:.4f} held by requests in flight)"
                    ),
                    budget_usd=self.budget_usd,
                    spent_usd=round(spent, 6),
                    estimate_usd=estimate,
                )
            )
        stage = SpendStage(
            status="ok",
            ms=timer.ms,
            budget_usd=self.budget_usd,
            spent_usd=round(row.spent_usd, 6),
            estimate_usd=estimate,
        )
        return Reservation(stage, day=day.isoformat(), reserved_usd=estimate)

    async def settle(self, reservation: Reservation, usages: Sequence[Usage]) -> SpendStage:
        """Release the hold and book the metered cost. A call that failed reported no usage, so on a
        model error this is a refund of whatever the request did not use."""
        stage = reservation.stage
        if reservation.day is None:  # never reserved (blocked, or nothing to settle)
            return stage
        timer = Timer()
        charged = 0.0 if reservation.free else sum(cost_usd(u, self.prices) for u in usages)
        try:
            row = await self.store.spend_settle(
                dt.date.fromisoformat(reservation.day), reservation.reserved_usd, charged, len(usages)
            )
        except Exception as exc:
            # The hold stays in place, and it is at least the real cost, so the cap still holds; failing
            # the request here would throw away an answer that was already paid for.
            log.error("spend settle failed; reservation left held", error=repr(exc))
            return msgspec.structs.replace(
                stage,
                ms=round(stage.ms + timer.ms, 2),
                charged_usd=round(charged, 6),
                detail="the cost could not be booked; the reservation stays held",
            )
        return msgspec.structs.replace(
            stage,
            ms=round(stage.ms + timer.ms, 2),
            spent_usd=round(row.spent_usd, 6),
            charged_usd=round(charged, 6),
        )
