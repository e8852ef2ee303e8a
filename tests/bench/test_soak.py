"""The soak's pass/fail judgement (bench/soak.py): the RSS-flat rule, and what 'the rate limit and the
spend cap hold exactly' means, on hand-made sequences of responses. No server runs here."""

from __future__ import annotations

import json

from bench.soak import (
    CACHED,
    Hit,
    Ledger,
    rate_limit_check,
    rate_limit_windows,
    rss_flat,
    spend_check,
    unhandled_lines,
)

HOUR = "2026-01-01 10:00"
NEXT_HOUR = "2026-01-01 11:00"


def test_rss_flat_is_judged_against_the_sample_at_half_time() -> None:
    # Warm-up growth before minute 5 is allowed; after it, up to +10% of the minute-5 value.
    samples = [(t * 30.0, 400.0 + 20 * t) for t in range(10)] + [
        (t * 30.0, 600.0 + 3 * (t - 10)) for t in range(10, 21)
    ]
    assert samples[10] == (300.0, 600.0) and samples[-1][1] == 630.0
    check = rss_flat(samples, reference_s=300)
    assert check.ok, check.detail
    assert "600.0 MiB at 5.0 min" in check.detail and "+5.0%" in check.detail


def test_rss_that_keeps_growing_after_half_time_fails() -> None:
    samples = [(t * 30.0, 600.0 + max(0, t - 10) * 7) for t in range(21)]  # +70 MiB = +11.7% at minute 10
    check = rss_flat(samples, reference_s=300)
    assert not check.ok
    assert "670.0 MiB at 10.0 min" in check.detail


def test_a_run_that_stopped_early_is_not_flat() -> None:
    samples = [(t * 30.0, 600.0) for t in range(15)]  # ended at minute 7 of 10
    assert not rss_flat(samples, reference_s=300).ok


def hits(codes: list[int], window: str = HOUR) -> list[Hit]:
    return [Hit("limited address", float(i), 1.0, code, window=window) for i, code in enumerate(codes)]


def test_rate_limit_holds_when_exactly_the_limit_is_admitted_then_429() -> None:
    seen = hits([200, 200, 200, 429, 429])
    cached = Hit("limited address", 10.0, 1.0, 200, variant=CACHED, cached=True, window=HOUR)
    check = rate_limit_check("rl", [*seen, cached], 3, {HOUR: 3})
    assert check.ok, check.detail
    assert "5 counted requests, 3 admitted, 2 × 429" in check.detail
    assert "1 of 1, 1 of them after the first 429" in check.detail


def test_one_admitted_past_the_limit_or_turned_away_under_it_fails() -> None:
    assert not rate_limit_check("rl", hits([200, 200, 200, 200, 429]), 3, {HOUR: 4}).ok
    assert not rate_limit_check("rl", hits([200, 429, 200, 429, 429]), 3, {HOUR: 2}).ok
    assert rate_limit_windows(hits([200, 429, 200, 429]), 3)[HOUR].wrong == 2  # both 429s came under the limit


def test_the_database_count_must_match_what_the_client_saw() -> None:
    check = rate_limit_check("rl", hits([200, 200, 200, 429]), 3, {HOUR: 2})
    assert not check.ok and "the database counted 2" in check.detail


def test_a_limit_never_reached_proves_nothing() -> None:
    assert not rate_limit_check("rl", hits([200, 200]), 3, {HOUR: 2}).ok


def test_each_hour_has_its_own_window() -> None:
    seen = hits([200, 200, 429]) + hits([200, 200, 429], window=NEXT_HOUR)
    assert rate_limit_check("rl", seen, 2, {HOUR: 2, NEXT_HOUR: 2}).ok


def test_a_cached_question_turned_away_over_the_limit_fails() -> None:
    refused = Hit("limited address", 10.0, 1.0, 429, variant=CACHED, window=HOUR)
    check = rate_limit_check("rl", [*hits([200, 200, 429]), refused], 2, {HOUR: 2})
    assert not check.ok and "not served from it" in check.detail


def spend_hits(outcomes: list[tuple[str, float]]) -> list[Hit]:
    return [
        Hit(
            "spend client",
            float(i),
            1.0,
            200,
            status="blocked" if reason else "answered",
            reason=reason or None,
            cached=False,
            charged_usd=charged,
            window=HOUR,
        )
        for i, (reason, charged) in enumerate(outcomes)
    ]


def test_spend_cap_admits_exactly_while_spend_is_under_budget() -> None:
    # Budget 0.001, each request charged 0.0004: admitted at 0, 0.0004, 0.0008; blocked from 0.0012 on.
    seen = spend_hits([("", 0.0004)] * 3 + [("budget_exhausted", 0.0)] * 2)
    ledger = {HOUR[:10]: Ledger(0.0012, 0.0, 6)}
    check = spend_check(seen, 0.001, 0.03, ledger, model_calls=6, call_cost=0.0002, db_counted=3)
    assert check.ok, check.detail
    assert "3 admitted then 2 `budget_exhausted`" in check.detail


def test_spend_cap_admitting_once_over_budget_fails() -> None:
    seen = spend_hits([("", 0.0004)] * 4 + [("budget_exhausted", 0.0)])
    ledger = {HOUR[:10]: Ledger(0.0016, 0.0, 8)}
    check = spend_check(seen, 0.001, 0.03, ledger, model_calls=8, call_cost=0.0002, db_counted=4)
    assert not check.ok and "against the rule" in check.detail


def test_spend_ledger_must_match_charges_calls_holds_and_refunds() -> None:
    seen = spend_hits([("", 0.0004)] * 3 + [("budget_exhausted", 0.0)])
    good = {HOUR[:10]: Ledger(0.0012, 0.0, 6)}
    assert spend_check(seen, 0.001, 0.03, good, 6, 0.0002, 3).ok
    # Booked more than the responses were charged.
    assert not spend_check(seen, 0.001, 0.03, {HOUR[:10]: Ledger(0.0014, 0.0, 6)}, 6, 0.0002, 3).ok
    # A reservation left held.
    assert not spend_check(seen, 0.001, 0.03, {HOUR[:10]: Ledger(0.0012, 0.03, 6)}, 6, 0.0002, 3).ok
    # Fewer calls booked than the Messages API received.
    assert not spend_check(seen, 0.001, 0.03, {HOUR[:10]: Ledger(0.0012, 0.0, 5)}, 6, 0.0002, 3).ok
    # A request the cap turned away was not given back to the rate limit.
    assert not spend_check(seen, 0.001, 0.03, good, 6, 0.0002, 4).ok


def test_unhandled_exceptions_are_found_in_json_and_plain_text_lines() -> None:
    lines = [
        "serving on http://127.0.0.1:8000 (profile local); Ctrl-C stops",
        json.dumps({"event": "model error", "level": "warning"}),
        json.dumps({"event": "unhandled error", "level": "error", "exception": "Traceback ..."}),
        "Traceback (most recent call last):",
    ]
    levels, bad = unhandled_lines(lines)
    assert levels == {"plain text": 2, "warning": 1, "error": 1}
    assert len(bad) == 2 and "unhandled error" in bad[0]
    assert unhandled_lines(lines[:2])[1] == []
