"""`make soak`: ten minutes of mixed traffic at a steady rate against a real `provenance serve`.

    .venv/bin/python -m bench.soak [--minutes 10] [--scale 1.0] [--limit 20] [--budget-usd 0.01]
                                   [--write | --no-write] [--logs DIR]

One embedded PostgreSQL in a temporary DATA_DIR (as in bench/run.py) serves two `provenance serve`
subprocesses on loopback:

- the **main server** (local profile, answer cache on, `RATE_LIMIT_PER_HOUR` and
  `RATE_LIMIT_PER_HOUR_API_KEY` = `--limit`, `TRUSTED_PROXIES=127.0.0.1` so each simulated client is the
  address it sends in `X-Forwarded-For`, bench/server.py's deep admission queue, so that a neighbour's
  CPU burst on this shared machine shows as latency rather than `503 overloaded`, which
  docs/reliability.md measures) gets the mixed traffic: cached
  questions, uncached ones (answered, refused, blocked by screening), deny-listed questions, bad input
  (invalid JSON, empty, too long, NUL, unknown field, unknown corpus, oversized body, wrong content type),
  clients with API keys (valid, revoked, unknown), and two clients that keep asking past their hourly limit
  (one address, one API key);
- the **spend server** (anthropic profile against the fake Messages API of tests/fake_anthropic.py, in
  a schema of its own, `DAILY_BUDGET_USD` = `--budget-usd`) gets one sequential client that asks until the
  day's budget is spent and keeps asking: the local profile makes no paid calls, so its ledger can only
  show $0, and the cap is exercised where it can bind.

Every steady kind is open-loop (requests leave on a fixed schedule whatever the server's latency); the
two rate-limited clients and the spend client are sequential, paced so that they pass their limits in a
run of any length. The server's RSS is sampled every 5 s (reported every 30 s) with psutil, its stdout and
stderr (structlog JSON) are kept and scanned, and the ledger and rate-limit rows are read back from
Postgres at the end. The run passes when the server's RSS stays flat (every sample of the second half
within +10% of the one at half time: minute 5 of 10), no response is 5xx (or a transport error), no log
line is an unhandled exception, every request is answered as its kind expects, and the rate limit and
spend cap hold exactly (`judge` below). The exit code is 1 when it fails. A full-length run rewrites
docs/soak.md and docs/soak-rss.svg; a shorter one only prints unless `--write`.
"""

from __future__ import annotations

import argparse
import asyncio
import datetime as dt
import json
import math
import os
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import psutil

from bench.common import machine, percentile
from bench.scaling import load_average
from bench.server import REPO_ROOT, Server, cpu_s, load_questions, postgres_pid, rss_mib, tree
from provenance.report import table

DOC = REPO_ROOT / "docs" / "soak.md"
SVG = REPO_ROOT / "docs" / "soak-rss.svg"

# The simulated clients' addresses (documentation ranges), believed because the server trusts loopback.
LIMITED_IP = "203.0.113.7"
SPEND_IP = "203.0.113.9"
LIMITED_KEY = "soak-limited"
CACHED = "cached question"  # the variant of a request whose question is in the cache
REVOKED_KEY = "soak-revoked"
SPEND_SCHEMA = "soak_spend"

SAMPLE_EVERY_S = 5.0
REPORT_EVERY_S = 30.0
RSS_TOLERANCE = 0.10
CACHED_QUESTIONS = 16
# The sequential clients: the limited ones send 4× their limit (a quarter of it cached questions), the
# spend client this many requests, spread over the run whatever its length.
LIMITED_STEPS_PER_LIMIT = 4
SPEND_STEPS = 150
# A sequential client does not send this close before the top of a UTC hour, so each of its requests
# falls in one rate-limit window (and one spend day) on both clocks.
HOUR_GUARD_S = 5.0
MAX_IN_FLIGHT = 256
# Default steady rates per second at --scale 1: about 2.7 uncached questions a second (~70 ms of CPU
# each on this machine, a fifth of one core) and about 22 cheap requests a second.
RATES: dict[str, float] = {
    "cached": 16.0,
    "uncached": 2.0,
    "deny-listed": 0.5,
    "bad input": 2.0,
    "API key, cached": 3.0,
    "API key, uncached": 0.4,
    "API key, revoked or unknown": 0.25,
}
KIND_NOTES: dict[str, str] = {
    "cached": "a primed question, from a rotating address; expects 200, `cached`",
    "uncached": "an eval question made unique (answerable, partial, unanswerable, off-topic), 5 per address; "
    "expects 200, not cached",
    "deny-listed": "an injection the deny-list blocks, 5 per address (counted); expects 200 `blocked` `injection`",
    "bad input": "invalid JSON, empty, whitespace, unknown field, NUL, too long, unknown corpus, 70 KB body, "
    "text/plain; expects 400/404/413/415",
    "API key, cached": "a primed question with a valid key; expects 200, `cached`",
    "API key, uncached": "a unique question with a valid key (keys rotate below the limit); expects 200",
    "API key, revoked or unknown": "expects 401 `invalid_api_key`",
    "limited address": f"{LIMITED_IP}: unique, deny-listed and cached questions in turn, past its limit",
    "limited API key": f"key {LIMITED_KEY!r}: the same, past the per-key limit",
    "spend client": f"{SPEND_IP} on the spend server: unique questions (and a repeat) past the budget",
}


def log(message: str) -> None:
    print(message, flush=True)


# --- what one request was and what came back ------------------------------------------------------


@dataclass(frozen=True)
class Spec:
    """One request: a POST to /ask with these headers and this exact body."""

    content: bytes
    headers: dict[str, str]
    variant: str = ""
    expect_code: int = 200


@dataclass
class Hit:
    kind: str
    t: float  # seconds since the mixed traffic began, when the request left
    ms: float  # client round trip
    code: int  # HTTP status; 0 for a transport error
    variant: str = ""
    status: str | None = None  # AskResponse.status
    reason: str | None = None
    cached: bool | None = None
    charged_usd: float | None = None
    estimate_usd: float | None = None
    window: str | None = None  # the UTC hour it was sent in (sequential clients only)
    straddled: bool = False  # sent and answered in different UTC hours
    expected: bool = True
    error: str | None = None

    @property
    def outcome(self) -> str:
        if self.code == 0:
            return "transport error"
        if self.status is None:
            return f"HTTP {self.code} {self.reason}" if self.reason else f"HTTP {self.code}"
        return f"{self.status} {self.reason}" if self.reason else self.status


def ask(question: str, ip: str | None = None, key: str | None = None, variant: str = "", **extra: Any) -> Spec:
    headers = {"content-type": "application/json"}
    if ip is not None:
        headers["x-forwarded-for"] = ip
    if key is not None:
        headers["authorization"] = f"Bearer {key}"
    return Spec(json.dumps({"question": question, **extra}).encode(), headers, variant)


def address(block: int, n: int) -> str:
    return f"10.{block}.{(n >> 8) & 255}.{n & 255}"


BAD_INPUTS: list[tuple[str, int, Callable[[], tuple[bytes, str]]]] = [
    ("invalid JSON", 400, lambda: (b'{"question": "How much does a locker', "application/json")),
    ("empty question", 400, lambda: (b'{"question": ""}', "application/json")),
    ("whitespace question", 400, lambda: (b'{"question": "   \\t "}', "application/json")),
    ("unknown field", 400, lambda: (b'{"question": "Locker price?", "turnstile_token": "x"}', "application/json")),
    ("NUL in question", 400, lambda: (b'{"question": "lock\\u0000er price"}', "application/json")),
    ("question too long", 400, lambda: (json.dumps({"question": "locker " * 100}).encode(), "application/json")),
    ("unknown corpus", 404, lambda: (b'{"question": "Locker price?", "corpus": "nope"}', "application/json")),
    ("oversized body", 413, lambda: (json.dumps({"question": "x" * 70_000}).encode(), "application/json")),
    ("wrong content type", 415, lambda: (b"How much does a locker cost?", "text/plain")),
]


def bad_input(i: int) -> Spec:
    name, code, build = BAD_INPUTS[i % len(BAD_INPUTS)]
    content, ctype = build()
    return Spec(content, {"content-type": ctype}, variant=name, expect_code=code)


def read_hit(kind: str, t: float, ms: float, response: httpx.Response, variant: str = "") -> Hit:
    hit = Hit(kind, t, ms, response.status_code, variant)
    try:
        body = response.json()
    except ValueError:
        return hit
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        hit.reason = str(body["error"].get("code"))  # e.g. 503 overloaded
    elif isinstance(body, dict) and "status" in body and "stages" in body:
        hit.status, hit.reason, hit.cached = body["status"], body.get("reason"), body.get("cached")
        spend = body["stages"].get("spend") or {}
        hit.charged_usd, hit.estimate_usd = spend.get("chargedUsd"), spend.get("estimateUsd")
    return hit


def expected(hit: Hit, spec: Spec) -> bool:
    """Whether a steady kind got what it expects (the sequential clients are judged as sequences)."""
    kind = hit.kind
    if kind in ("cached", "API key, cached") or spec.variant == CACHED:
        return hit.code == 200 and hit.cached is True and hit.status in ("answered", "refused")
    if kind in ("uncached", "API key, uncached"):
        return hit.code == 200 and hit.cached is False and hit.status in ("answered", "refused", "blocked")
    if kind == "deny-listed":
        return hit.code == 200 and (hit.status, hit.reason) == ("blocked", "injection")
    if kind == "bad input":
        return hit.code == spec.expect_code
    if kind == "API key, revoked or unknown":
        return hit.code == 401 and (hit.status, hit.reason) == ("blocked", "invalid_api_key")
    return hit.code in (200, 429)


# --- the judgement: pure functions over what was seen (tests/test_soak.py) -------------------------


@dataclass(frozen=True)
class Check:
    name: str
    ok: bool
    detail: str


def rss_flat(samples: Sequence[tuple[float, float]], reference_s: float, tolerance: float = RSS_TOLERANCE) -> Check:
    """Every sample from `reference_s` on (the last five minutes of ten) within +tolerance of the sample
    taken at `reference_s` (minute 5): growth that keeps going after warm-up is a leak."""
    if not samples:
        return Check("RSS flat", False, "no samples")
    ref_t, ref = min(samples, key=lambda s: abs(s[0] - reference_s))
    later = [(t, mib) for t, mib in samples if t >= ref_t]
    peak_t, peak = max(later, key=lambda s: s[1])
    bound = ref * (1 + tolerance)
    ok = peak <= bound and samples[-1][0] >= 2 * reference_s - SAMPLE_EVERY_S
    return Check(
        "RSS flat",
        ok,
        f"{ref:.1f} MiB at {ref_t / 60:.1f} min; highest after it {peak:.1f} MiB at {peak_t / 60:.1f} min "
        f"({(peak / ref - 1) * 100:+.1f}%, bound +{tolerance * 100:.0f}% = {bound:.1f} MiB); "
        f"last {samples[-1][1]:.1f} MiB at {samples[-1][0] / 60:.1f} min",
    )


@dataclass
class Window:
    attempts: int = 0  # requests that the limit applies to (not cached ones)
    admitted: int = 0
    limited: int = 0  # 429s
    wrong: int = 0  # admitted past the limit, or turned away under it


def rate_limit_windows(hits: Sequence[Hit], limit: int) -> dict[str, Window]:
    """Per UTC hour, the limit holds exactly when each counted request is admitted while fewer than
    `limit` were admitted before it in that hour, and answered 429 otherwise. Questions already in the
    cache are not counted (`rate_limit_check` sees that they are served)."""
    windows: dict[str, Window] = {}
    for hit in hits:
        if hit.variant == CACHED:
            continue
        w = windows.setdefault(hit.window or "?", Window())
        w.attempts += 1
        should_admit = w.admitted < limit
        admitted = hit.code == 200
        if admitted:
            w.admitted += 1
        elif hit.code == 429:
            w.limited += 1
        if admitted != should_admit or hit.code not in (200, 429):
            w.wrong += 1
    return windows


def rate_limit_check(name: str, hits: Sequence[Hit], limit: int, db_counts: dict[str, int]) -> Check:
    windows = rate_limit_windows(hits, limit)
    problems = []
    for window, w in sorted(windows.items()):
        if w.wrong:
            problems.append(f"{w.wrong} answered against the rule in {window}")
        if w.attempts > limit and w.admitted != limit:
            problems.append(f"{w.admitted} admitted of {w.attempts} in {window}, limit {limit}")
        if db_counts.get(window, 0) != w.admitted:
            problems.append(f"the database counted {db_counts.get(window, 0)} in {window}, the client saw {w.admitted}")
    if not any(w.attempts > limit for w in windows.values()):
        problems.append("the limit was never reached")
    straddled = sum(h.straddled for h in hits)
    if straddled:
        problems.append(f"{straddled} requests straddled an hour boundary")
    cached = [h for h in hits if h.variant == CACHED]
    refused = [h for h in cached if not (h.code == 200 and h.cached)]
    if refused:
        problems.append(f"{len(refused)} of {len(cached)} questions in the cache not served from it")
    first_429 = min((h.t for h in hits if h.code == 429), default=math.inf)
    over = sum(1 for h in cached if h.t > first_429 and h.code == 200 and h.cached)
    summary = "; ".join(
        f"{window}: {w.attempts} counted requests, {w.admitted} admitted, {w.limited} × 429 (DB count "
        f"{db_counts.get(window, 0)})"
        for window, w in sorted(windows.items())
    )
    return Check(
        name,
        not problems,
        summary + f"; questions in the cache served from it: {len(cached) - len(refused)} of {len(cached)}, "
        f"{over} of them after the first 429" + ("; " + "; ".join(problems) if problems else ""),
    )


@dataclass
class SpendDay:
    requests: int = 0  # uncached requests (cached ones cost nothing and never reach the cap)
    admitted: int = 0
    exhausted: int = 0  # blocked budget_exhausted
    charged: float = 0.0  # Σ chargedUsd of the admitted ones, as the responses reported it
    wrong: int = 0  # admitted at or over the budget, or refused under it


def spend_days(hits: Sequence[Hit], budget: float) -> dict[str, SpendDay]:
    """A sequential client's requests, per UTC day: each is admitted exactly while what the day's
    admitted requests were charged is under the budget (the reservation's rule, settled + held < budget,
    with nothing else held), and blocked `budget_exhausted` from then on."""
    days: dict[str, SpendDay] = {}
    for hit in hits:
        if hit.cached:
            continue
        day = days.setdefault((hit.window or "?")[:10], SpendDay())
        day.requests += 1
        should_admit = day.charged < budget
        exhausted = (hit.status, hit.reason) == ("blocked", "budget_exhausted")
        admitted = hit.code == 200 and not exhausted
        if admitted:
            day.admitted += 1
            day.charged += hit.charged_usd or 0.0
        elif exhausted:
            day.exhausted += 1
        if admitted != should_admit or hit.code != 200:
            day.wrong += 1
    return days


@dataclass(frozen=True)
class Ledger:
    spent_usd: float
    reserved_usd: float
    calls: int


def spend_check(
    hits: Sequence[Hit],
    budget: float,
    estimate: float,
    ledger: dict[str, Ledger],
    model_calls: int,
    call_cost: float,
    db_counted: int,
) -> Check:
    """The cap holds exactly: admission by the rule above; the ledger's spend equals what the responses
    were charged and what the Messages API was called for; no hold is left; the day overshoots the
    budget by less than one request's reserved estimate; a request turned away by the cap is given back
    to the rate limit (the database counted exactly the admitted ones)."""
    days = spend_days(hits, budget)
    problems = []
    for day, d in sorted(days.items()):
        row = ledger.get(day, Ledger(0.0, 0.0, 0))
        if d.wrong:
            problems.append(f"{d.wrong} requests admitted or refused against the rule on {day}")
        if abs(row.spent_usd - d.charged) > 1e-6 * max(1, d.admitted):
            problems.append(f"ledger ${row.spent_usd:.6f} but responses charged ${d.charged:.6f} on {day}")
        if row.reserved_usd > 1e-9:
            problems.append(f"${row.reserved_usd:.6f} still held on {day}")
        if row.spent_usd >= budget + estimate:
            problems.append(f"${row.spent_usd:.6f} spent on {day}, over budget + one estimate")
    if not any(d.exhausted for d in days.values()):
        problems.append("the budget was never exhausted")
    spent = sum(r.spent_usd for r in ledger.values())
    calls = sum(r.calls for r in ledger.values())
    if calls != model_calls:
        problems.append(f"ledger booked {calls} calls, the Messages API got {model_calls}")
    if abs(spent - model_calls * call_cost) > 1e-9:
        problems.append(f"ledger ${spent:.6f} but {model_calls} calls cost ${model_calls * call_cost:.6f}")
    admitted = sum(d.admitted for d in days.values())
    if db_counted != admitted:
        problems.append(f"rate limit counted {db_counted}, {admitted} were admitted (refunds)")
    summary = "; ".join(
        f"{day}: {d.requests} uncached requests, {d.admitted} admitted then {d.exhausted} `budget_exhausted`; "
        f"ledger ${ledger.get(day, Ledger(0, 0, 0)).spent_usd:.6f} spent (Σ charged ${d.charged:.6f}), "
        f"${ledger.get(day, Ledger(0, 0, 0)).reserved_usd:.6f} held, {ledger.get(day, Ledger(0, 0, 0)).calls} calls"
        for day, d in sorted(days.items())
    )
    summary += (
        f"; Messages API calls {model_calls} × ${call_cost:.6f}; budget ${budget:.4f}, estimate per request "
        f"${estimate:.6f}; rate-limit count {db_counted}"
    )
    return Check("spend cap holds exactly", not problems, summary + ("; " + "; ".join(problems) if problems else ""))


def plain_text_samples(logs: dict[str, list[str]], limit: int = 4) -> list[str]:
    """The first few distinct lines that are not JSON (start-up lines, anything printed), digits folded."""
    seen: dict[str, str] = {}
    for name, lines in logs.items():
        for line in lines:
            text = line.strip()
            if not text or text.startswith("{"):
                continue
            shape = re.sub(r"\d+", "N", text)
            if shape not in seen and len(seen) < limit:
                seen[shape] = f"{name}: {text[:160]}"
    return list(seen.values())


def unhandled_lines(lines: Iterable[str]) -> tuple[Counter[str], list[str]]:
    """Log lines by level, and the ones that are unhandled exceptions: structlog's `log.exception` (level
    error, with an `exception` field), any error or critical line, and uvicorn's plain-text traceback."""
    levels: Counter[str] = Counter()
    bad: list[str] = []
    for line in lines:
        text = line.strip()
        if not text:
            continue
        try:
            record = json.loads(text)
        except ValueError:
            record = None
        if isinstance(record, dict):
            level = str(record.get("level", "?"))
            levels[level] += 1
            if level in ("error", "critical", "exception") or "exception" in record:
                bad.append(text)
        else:
            levels["plain text"] += 1
            if "Traceback (most recent call last)" in text or "Exception in ASGI application" in text:
                bad.append(text)
    return levels, bad


# --- running it -------------------------------------------------------------------------------------


class Run:
    """The traffic: question pools, keys, and every response seen."""

    def __init__(self, duration_s: float, scale: float, limit: int) -> None:
        self.duration_s = duration_s
        self.scale = scale
        self.limit = limit
        self.hits: list[Hit] = []
        self.skipped: Counter[str] = Counter()
        self.errors: list[str] = []
        self.rss: list[tuple[float, float, float, float]] = []  # (t, server, Postgres, spend server) MiB
        self.started = 0.0
        self.keys: list[str] = []
        self.limited_key = ""
        self.revoked_key = ""
        from provenance.stages.screen import screen_deny_list

        adversarial = load_questions(("adversarial",))
        self.denied = [q for q in adversarial if screen_deny_list(q) is not None]
        self.pool = load_questions() + [q for q in adversarial if q not in self.denied]
        self.cached: list[str] = []  # primed questions whose answer was cached
        self._unique = 0

    def unique(self) -> str:
        """A pool question no one asked before, so it misses the cache (the cache key is the normalised
        words, so a distinct reference number is enough)."""
        self._unique += 1
        return f"{self.pool[self._unique % len(self.pool)]} (ref {self._unique})"

    def now(self) -> float:
        return time.monotonic() - self.started

    async def send(self, client: httpx.AsyncClient, kind: str, spec: Spec, window: bool = False) -> Hit:
        t = self.now()
        hour = utc_hour() if window else None
        started = time.perf_counter()
        try:
            response = await client.post("/ask", content=spec.content, headers=spec.headers)
        except httpx.HTTPError as exc:
            hit = Hit(kind, t, (time.perf_counter() - started) * 1000, 0, spec.variant, error=repr(exc))
            self.errors.append(f"{kind}: {exc!r}")
        else:
            hit = read_hit(kind, t, (time.perf_counter() - started) * 1000, response, spec.variant)
        hit.window = hour
        hit.straddled = hour is not None and utc_hour() != hour
        hit.expected = expected(hit, spec)
        self.hits.append(hit)
        return hit

    # Each steady kind: request i of the kind, built fresh (unique questions, rotating addresses).
    def steady_spec(self, kind: str, i: int) -> Spec:
        if kind == "cached":
            return ask(self.cached[i % len(self.cached)], ip=address(1, i % 4096))
        if kind == "uncached":
            return ask(self.unique(), ip=address(2, i // 5))
        if kind == "deny-listed":
            return ask(self.denied[i % len(self.denied)], ip=address(3, i // 5))
        if kind == "bad input":
            return bad_input(i)
        if kind == "API key, cached":
            return ask(self.cached[(i * 7) % len(self.cached)], key=self.keys[i % len(self.keys)])
        if kind == "API key, uncached":
            return ask(self.unique(), key=self.keys[i % len(self.keys)])
        if kind == "API key, revoked or unknown":
            return ask(self.cached[0], key=self.revoked_key if i % 2 else "pv_" + "0" * 43)
        raise ValueError(kind)

    async def steady(self, client: httpx.AsyncClient, kind: str, rate: float) -> None:
        """Open loop: request i leaves at i / rate seconds, however long earlier ones take."""
        tasks: set[asyncio.Task[Hit]] = set()
        for i in range(math.floor(rate * self.duration_s)):
            await sleep_until(self.started + i / rate)
            if len(tasks) >= MAX_IN_FLIGHT:
                self.skipped[kind] += 1
                continue
            task = asyncio.create_task(self.send(client, kind, self.steady_spec(kind, i)))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        if tasks:
            await asyncio.wait(tasks)

    async def limited(self, client: httpx.AsyncClient, kind: str, ip: str | None, key: str | None) -> None:
        """Sequential, paced so that it sends LIMITED_STEPS_PER_LIMIT × the limit in the run: unique,
        unique, deny-listed (all three counted) and a cached question (never counted, served anyway)."""
        steps = LIMITED_STEPS_PER_LIMIT * self.limit
        for i in range(steps):
            await sleep_until(self.started + i * self.duration_s / steps)
            await hour_guard()
            if i % 4 == 3:
                spec = ask(self.cached[i % 5], ip=ip, key=key, variant=CACHED)
            else:
                question = self.denied[i % len(self.denied)] if i % 4 == 2 else self.unique()
                spec = ask(question, ip=ip, key=key)
            await self.send(client, kind, spec, window=True)

    async def spender(self, client: httpx.AsyncClient) -> None:
        """Sequential on the spend server: unique questions, every third a repeat of the first (cached
        once it was answered, and served after the budget is spent)."""
        first = self.pool[0]
        for i in range(SPEND_STEPS):
            await sleep_until(self.started + i * self.duration_s / SPEND_STEPS)
            await hour_guard()
            if i % 3 == 2:
                spec = ask(first, ip=SPEND_IP, variant=CACHED)
            else:
                spec = ask(first if i == 0 else self.unique(), ip=SPEND_IP)
            await self.send(client, "spend client", spec, window=True)

    async def sample(self, server: Server, spend: Server) -> None:
        n = 0
        while True:
            await sleep_until(self.started + n * SAMPLE_EVERY_S)
            if n * SAMPLE_EVERY_S > self.duration_s + 1e-9:
                return
            self.rss.append(
                (
                    n * SAMPLE_EVERY_S,
                    rss_mib(server.processes()),
                    rss_mib(tree(postgres_pid(server.data_dir))),
                    rss_mib(spend.processes()),
                )
            )
            n += 1


async def sleep_until(deadline: float) -> None:
    delay = deadline - time.monotonic()
    if delay > 0:
        await asyncio.sleep(delay)


def utc_hour() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:00")


async def hour_guard() -> None:
    now = dt.datetime.now(dt.UTC)
    to_next = 3600 - (now.minute * 60 + now.second + now.microsecond / 1e6)
    if to_next < HOUR_GUARD_S:
        await asyncio.sleep(to_next + 1.0)


async def traffic(run: Run, server: Server, spend: Server) -> None:
    limits = httpx.Limits(max_connections=MAX_IN_FLIGHT, max_keepalive_connections=64)
    async with (
        httpx.AsyncClient(base_url=server.url, timeout=60, limits=limits) as main,
        httpx.AsyncClient(base_url=spend.url, timeout=60) as other,
    ):
        run.started = time.monotonic()
        await asyncio.gather(
            run.sample(server, spend),
            *(run.steady(main, kind, rate * run.scale) for kind, rate in RATES.items()),
            run.limited(main, "limited address", LIMITED_IP, None),
            run.limited(main, "limited API key", None, run.limited_key),
            run.spender(other),
        )


async def prime(run: Run, server: Server) -> None:
    """Answer the cached pool once (each from an address of its own, so priming counts against no one)
    and keep the questions whose answer was cached (answered or refused, never blocked)."""
    async with httpx.AsyncClient(base_url=server.url, timeout=120) as client:
        for i, question in enumerate(load_questions()[:CACHED_QUESTIONS]):
            r = await client.post("/ask", json={"question": question}, headers={"x-forwarded-for": address(9, i)})
            if r.status_code == 200 and r.json()["status"] in ("answered", "refused"):
                run.cached.append(question)
        for question in run.cached:  # and check that they are
            r = await client.post("/ask", json={"question": question}, headers={"x-forwarded-for": address(9, 999)})
            if not r.json().get("cached"):
                raise RuntimeError(f"a primed question was not cached: {question!r}")


async def create_keys(dsn: str, run: Run, count: int) -> None:
    """API keys through the store, as `provenance keys create` makes them; one revoked."""
    from provenance.access.store import AccessStore
    from provenance.guards.apikeys import create_key
    from provenance.settings import Settings
    from provenance.store.guards import GuardStore
    from provenance.store.pool import create_pool

    pool = await create_pool(dsn, Settings().with_overrides(database_url=dsn))
    try:
        store = AccessStore(pool)

        async def make(name: str) -> str:
            key = await create_key(store, name)
            if key is None:
                raise RuntimeError(f"the API key name {name!r} is taken")
            return key

        run.keys = [await make(f"soak-{n:02d}") for n in range(count)]
        run.limited_key = await make(LIMITED_KEY)
        run.revoked_key = await make(REVOKED_KEY)
        if not await GuardStore(pool).revoke_api_key(REVOKED_KEY):
            raise RuntimeError("could not revoke the soak's revoked key")
    finally:
        await pool.close()


@dataclass
class DbState:
    limited_ip: dict[str, int] = field(default_factory=dict)  # window -> count
    limited_key: dict[str, int] = field(default_factory=dict)
    spend_counted: int = 0
    spend_ledger: dict[str, Ledger] = field(default_factory=dict)
    local_ledger: dict[str, Ledger] = field(default_factory=dict)


async def read_db(dsn: str) -> DbState:
    state = DbState()
    conn = await asyncpg.connect(dsn)
    try:

        async def windows(schema: str, key: str) -> dict[str, int]:
            rows = await conn.fetch(
                f"SELECT to_char(window_start AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:00') AS w, count "
                f'FROM "{schema}".rate_limits WHERE client_key = $1',
                key,
            )
            return {r["w"]: int(r["count"]) for r in rows}

        async def ledger(schema: str) -> dict[str, Ledger]:
            rows = await conn.fetch(
                f"SELECT day::text AS day, spent_usd::float8 AS spent, reserved_usd::float8 AS reserved, calls "
                f'FROM "{schema}".spend_ledger'
            )
            return {r["day"]: Ledger(r["spent"], r["reserved"], int(r["calls"])) for r in rows}

        state.limited_ip = await windows("public", f"ip:{LIMITED_IP}")
        state.limited_key = await windows("public", f"key:{LIMITED_KEY}")
        state.spend_counted = sum((await windows(SPEND_SCHEMA, f"ip:{SPEND_IP}")).values())
        state.spend_ledger = await ledger(SPEND_SCHEMA)
        state.local_ledger = await ledger("public")
    finally:
        await conn.close()
    return state


# --- the report -------------------------------------------------------------------------------------


@dataclass
class Report:
    machine: str
    load_before: str
    args: argparse.Namespace
    load_after: str = ""
    wall_s: float = 0.0
    checks: list[Check] = field(default_factory=list)
    log_levels: dict[str, Counter[str]] = field(default_factory=dict)
    cpu: dict[str, float] = field(default_factory=dict)
    plain_lines: list[str] = field(default_factory=list)  # what the non-JSON log lines say, a few of them
    command: str = ".venv/bin/python -m bench.soak"
    nice: int = 0  # the soak's niceness, which the servers it starts inherit

    @property
    def passed(self) -> bool:
        return all(c.ok for c in self.checks)


def _counts(values: Iterable[Any]) -> str:
    return ", ".join(f"{k} × {v}" for k, v in sorted(Counter(values).items(), key=lambda kv: str(kv[0])))


def status_table(hits: Sequence[Hit]) -> str:
    rows: list[list[object]] = []
    order = [*RATES, "limited address", "limited API key", "spend client"]
    for kind in order:
        mine = [h for h in hits if h.kind == kind]
        if not mine:
            continue
        unexpected = sum(not h.expected for h in mine)
        outcomes = _counts(("cached " if h.cached else "") + h.outcome for h in mine)
        rows.append([kind, len(mine), _counts(h.code for h in mine), outcomes, unexpected])
    codes = Counter(h.code for h in hits)
    unexpected = sum(not h.expected for h in hits)
    total = f"| **all** | **{len(hits)}** | {_counts(codes.elements())} | | {unexpected} |"
    return "\n".join([*table(("kind", "requests", "HTTP status", "outcome", "unexpected"), "lrllr", rows), total])


def bad_input_table(hits: Sequence[Hit]) -> str:
    rows = []
    for name, code, _ in BAD_INPUTS:
        mine = [h for h in hits if h.kind == "bad input" and h.variant == name]
        rows.append([f"{name} (expects {code})", len(mine), _counts(h.code for h in mine)])
    return "\n".join(table(("bad input", "requests", "HTTP status"), "lrl", rows))


def minute_table(hits: Sequence[Hit], minutes: int) -> str:
    rows = []
    main = [h for h in hits if h.kind != "spend client"]
    for m in range(minutes):
        mine = [h for h in main if m * 60 <= h.t < (m + 1) * 60]
        cached = [h.ms for h in mine if h.cached]
        uncached = [h.ms for h in mine if h.code == 200 and h.cached is False]
        # The tails beside the medians: a stall shows in p99.9 long before it moves a median (issue 48).
        times = (
            percentile([h.ms for h in mine], 0.99),
            percentile(cached, 0.5),
            percentile(cached, 0.99),
            percentile(cached, 0.999),
            percentile(uncached, 0.5),
            percentile(uncached, 0.99),
        )
        rows.append([m + 1, len(mine), sum(h.code >= 500 for h in mine), *(f"{t:.1f}" for t in times)])
    head = (
        "minute",
        "requests",
        "5xx",
        "p99 ms, all",
        "p50 ms, cached",
        "p99 ms, cached",
        "p99.9 ms, cached",
        "p50 ms, uncached",
        "p99 ms, uncached",
    )
    return "\n".join(table(head, "rrrrrrrrr", rows))


def rss_table(samples: Sequence[tuple[float, float, float, float]]) -> str:
    rows = [
        [f"{int(t) // 60}:{int(t) % 60:02d}", f"{srv:.1f}", f"{pg:.1f}", f"{spend:.1f}"]
        for t, srv, pg, spend in samples
        if abs(t / REPORT_EVERY_S - round(t / REPORT_EVERY_S)) < 1e-9
    ]
    return "\n".join(table(("time", "server RSS MiB", "PostgreSQL RSS MiB", "spend server RSS MiB"), "rrrr", rows))


def rss_svg(samples: Sequence[tuple[float, float, float, float]], reference_s: float) -> str:
    """The server's RSS over the run, with the value at `reference_s` and the +10% bound it must stay under."""
    width, height, left, right, top, bottom = 640, 240, 56, 16, 16, 36
    if not samples:
        return ""
    end = max(t for t, *_ in samples) or 1.0
    ref = min(samples, key=lambda s: abs(s[0] - reference_s))[1]
    values = [s[1] for s in samples]
    low = math.floor(min(values) * 0.95 / 10) * 10
    high = math.ceil(max(max(values), ref * (1 + RSS_TOLERANCE)) * 1.02 / 10) * 10

    def x(t: float) -> float:
        return left + (width - left - right) * t / end

    def y(mib: float) -> float:
        return top + (height - top - bottom) * (1 - (mib - low) / (high - low or 1))

    points = " ".join(f"{x(t):.1f},{y(v):.1f}" for t, v, *_ in samples)
    bound = ref * (1 + RSS_TOLERANCE)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        "<title>The soak's server RSS over the run (docs/soak.md)</title>",
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<line x1="{left}" y1="{height - bottom}" x2="{width - right}" y2="{height - bottom}" stroke="#999"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{height - bottom}" stroke="#999"/>',
    ]
    for m in range(int(end // 60) + 1):
        parts.append(f'<text x="{x(m * 60):.1f}" y="{height - bottom + 14}" text-anchor="middle">{m}</text>')
    parts.append(f'<text x="{(left + width - right) / 2}" y="{height - 4}" text-anchor="middle">minutes</text>')
    for mib in (low, (low + high) / 2, high):
        parts.append(f'<text x="{left - 4}" y="{y(mib) + 4:.1f}" text-anchor="end">{mib:.0f}</text>')
    parts.append(f'<text x="4" y="{top + 4}" >MiB</text>')
    x_ref = x(reference_s)
    parts += [
        f'<line x1="{x_ref:.1f}" y1="{y(bound):.1f}" x2="{width - right}" y2="{y(bound):.1f}" '
        f'stroke="#c33" stroke-dasharray="4 3"/>',
        f'<text x="{width - right - 2}" y="{y(bound) - 4:.1f}" text-anchor="end" fill="#c33">'
        f"+{RSS_TOLERANCE * 100:.0f}% of minute {reference_s / 60:g}: {bound:.0f} MiB</text>",
        f'<line x1="{x_ref:.1f}" y1="{top}" x2="{x_ref:.1f}" y2="{height - bottom}" stroke="#bbb"/>',
        f'<polyline points="{points}" fill="none" stroke="#1f5fbf" stroke-width="1.5"/>',
        f'<text x="{x(samples[-1][0]) - 2:.1f}" y="{y(samples[-1][1]) + 14:.1f}" text-anchor="end" fill="#1f5fbf">'
        f"server RSS, {samples[-1][1]:.0f} MiB at the end</text>",
        "</svg>",
    ]
    return "\n".join(parts) + "\n"


def judge(
    run: Run,
    reference_s: float,
    db: DbState,
    logs: dict[str, list[str]],
    budget: float,
    estimate: float,
    model_calls: int,
    call_cost: float,
) -> tuple[list[Check], dict[str, Counter[str]]]:
    hits = run.hits
    checks = [rss_flat([(t, srv) for t, srv, *_ in run.rss], reference_s)]
    five = [h for h in hits if h.code >= 500]
    checks.append(Check("no 5xx", not five, f"{len(five)} responses 5xx ({_counts(h.kind for h in five)})"))
    transport = [h for h in hits if h.code == 0]
    checks.append(Check("no transport errors", not transport, f"{len(transport)}: {run.errors[:3]}"))
    levels: dict[str, Counter[str]] = {}
    bad: list[str] = []
    for name, lines in logs.items():
        levels[name], found = unhandled_lines(lines)
        bad += [f"{name}: {line[:300]}" for line in found]
    checks.append(Check("no unhandled exception in the logs", not bad, f"{len(bad)} {bad[:3]}"))
    steady = [h for h in hits if h.kind in RATES]
    wrong = [h for h in steady if not h.expected]
    checks.append(
        Check(
            "every request answered as its kind expects",
            not wrong and not run.skipped,
            f"{len(wrong)} of {len(steady)} steady requests unexpected "
            f"({_counts(f'{h.kind}: {h.code} {h.outcome}' for h in wrong[:50])}); "
            f"{sum(run.skipped.values())} not sent because {MAX_IN_FLIGHT} were in flight",
        )
    )
    for kind, key_db in (("limited address", db.limited_ip), ("limited API key", db.limited_key)):
        mine = [h for h in hits if h.kind == kind]
        checks.append(rate_limit_check(f"rate limit holds exactly: {kind}", mine, run.limit, key_db))
    spend_hits = [h for h in hits if h.kind == "spend client"]
    checks.append(spend_check(spend_hits, budget, estimate, db.spend_ledger, model_calls, call_cost, db.spend_counted))
    repeats = [h for h in spend_hits if h.variant == CACHED]
    exhausted_at = min((h.t for h in spend_hits if h.reason == "budget_exhausted"), default=math.inf)
    after = [h for h in repeats if h.t > exhausted_at]
    checks.append(
        Check(
            "cached answers served after the budget is spent",
            bool(after) and all(h.code == 200 and h.cached for h in repeats),
            f"{sum(1 for h in repeats if h.cached)} of {len(repeats)} repeats of the first question served from "
            f"the cache, {len(after)} of them after the first `budget_exhausted`",
        )
    )
    local = db.local_ledger
    checks.append(
        Check(
            "local profile books nothing and holds nothing",
            all(r.spent_usd == 0 and r.reserved_usd == 0 for r in local.values()),
            "; ".join(
                f"{d}: ${r.spent_usd} spent, ${r.reserved_usd} held, {r.calls} local model calls booked"
                for d, r in sorted(local.items())
            ),
        )
    )
    return checks, levels


def render(report: Report, run: Run) -> str:
    args = report.args
    minutes = math.ceil(run.duration_s / 60)
    steady_rate = sum(RATES.values()) * args.scale
    uncached_rate = (RATES["uncached"] + RATES["API key, uncached"]) * args.scale
    verdict = "**PASSED**" if report.passed else "**FAILED**"
    checks = table(
        ("check", "result", "measured"),
        "lll",
        ([c.name, "pass" if c.ok else "**FAIL**", c.detail] for c in report.checks),
    )
    levels = "; ".join(
        f"{name}: {_counts(counter.elements()) or 'empty'}" for name, counter in report.log_levels.items()
    )
    sequential = (
        ("limited address", LIMITED_STEPS_PER_LIMIT * args.limit),
        ("limited API key", LIMITED_STEPS_PER_LIMIT * args.limit),
        ("spend client", SPEND_STEPS),
    )
    kinds = table(
        ("kind", "rate", "what"),
        "lll",
        [
            *([kind, f"{RATES[kind] * args.scale:g}/s", KIND_NOTES[kind]] for kind in RATES),
            *([kind, f"sequential, {steps} in the run", KIND_NOTES[kind]] for kind, steps in sequential),
        ],
    )
    cpu = report.cpu
    parts = [
        "# Soak",
        "",
        f"One run of `make soak` (`{report.command}`); the figures are exactly those it printed. Result: {verdict}.",
        "",
        f"- Machine: {report.machine}.",
        f"- Load average (1/5/15 min) before the run: {report.load_before}; after: {report.load_after}. The "
        "machine is shared with other engineers' work, so other work may have competed for "
        "the two cores; compare latencies only at similar load.",
        f"- Run time: {report.wall_s:.0f} s in all, {run.duration_s:.0f} s of mixed traffic. Embedded "
        "PostgreSQL 18 + pgvector, two `provenance serve` subprocesses (one worker each) and the load "
        "generator (httpx.AsyncClient on loopback) on the same machine"
        + (f", all at nice {report.nice} (so the other work on the machine came first)." if report.nice else "."),
        f"- CPU during the traffic: server {cpu.get('server', 0):.0f} s "
        f"({cpu.get('server', 0) / run.duration_s * 100:.0f}% "
        f"of one core), spend server {cpu.get('spend', 0):.0f} s, PostgreSQL {cpu.get('postgres', 0):.0f} s, load "
        f"generator {cpu.get('client', 0):.0f} s.",
        "",
        "## Verdict",
        "",
        *checks,
        "",
        "## Traffic",
        "",
        f"About {steady_rate:.1f} requests a second on a fixed schedule (open loop: a slow answer does not "
        f"slow the sender), {uncached_rate:.1f} of them uncached questions, plus three sequential clients. "
        f"Main server: local profile, cache on, `RATE_LIMIT_PER_HOUR` = `RATE_LIMIT_PER_HOUR_API_KEY` = "
        f"{args.limit}, `TRUSTED_PROXIES=127.0.0.1` (each simulated client is the address it sends in "
        f"`X-Forwarded-For`), `ASK_QUEUE_MAX=256`, `ASK_QUEUE_TIMEOUT_S=120` (bench/server.py's: on this shared "
        "machine a neighbour's burst of CPU should show as latency, not as the `503 overloaded` that "
        "docs/reliability.md measures; the shipped 32 and 5 s gave 6 × 503 in a "
        "one-minute trial at load average 11, when the uncached p99 was 7.4 s). "
        f"{len(run.keys)} API keys rotate so that no key reaches the limit; the questions primed into the cache: "
        f"{len(run.cached)}. Spend server: anthropic profile against the fake Messages API "
        "(tests/fake_anthropic.py: 100 input and 20 output tokens per call, no latency), "
        f"`DAILY_BUDGET_USD={args.budget_usd:g}`, its own schema; the local profile makes no paid calls, so "
        "the cap can only bind there.",
        "",
        *kinds,
        "",
        "## Status counts",
        "",
        status_table(run.hits),
        "",
        bad_input_table(run.hits),
        "",
        "## Latency per minute (main server, client round trip)",
        "",
        minute_table(run.hits, minutes),
        "",
        "## Memory",
        "",
        f"RSS of the `provenance serve` process (psutil, sampled every {SAMPLE_EVERY_S:g} s, shown every "
        f"{REPORT_EVERY_S:g} s; PostgreSQL counts postmaster and backends, shared buffers once per process). "
        "The rule: every sample of the second half within +10% of the one at half time.",
        "",
        "![The server's RSS over the run](soak-rss.svg)",
        "",
        rss_table(run.rss),
        "",
        "## Logs",
        "",
        f"Both servers' stdout and stderr (structlog JSON at `LOG_LEVEL=warning`, plus the start-up lines), "
        f"by level: {levels}. The lines that are not JSON read (the first few kinds):",
        "",
        *(f"- `{line}`" for line in report.plain_lines),
        "",
        "## How the checks are made",
        "",
        "- **Rate limit.** The limited clients send their requests one at a time and never within "
        f"{HOUR_GUARD_S:g} s before the top of a UTC hour, so each request belongs to one window. In each "
        "window a counted request (not cached) must be admitted exactly while fewer than the limit were "
        "admitted before it, and answered 429 after; the `rate_limits` row must hold the same count; the "
        "limit must be reached; cached questions must be served over the limit.",
        "- **Spend cap.** The spend client is sequential, so nothing else is held when it asks: a request "
        "must be admitted exactly while the day's charges so far (Σ `stages.spend.chargedUsd` of the "
        "admitted ones) are under the budget, and blocked `budget_exhausted` after. The `spend_ledger` row "
        "must equal that sum and the Messages API calls the fake received times their price, book as many "
        "calls as the fake received, hold nothing at the end, and overshoot the budget by less than one "
        "request's reserved estimate. Requests the cap turned away must have been given back to the rate "
        "limit (its count equals the admitted requests), and the repeated question must still be served "
        "from the cache once the budget is spent.",
        "- **Memory.** RSS of the server's process tree; growth that continues after minute 5 is a leak.",
        "",
    ]
    return "\n".join(parts)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--minutes", type=float, default=10.0, help="length of the mixed traffic (default 10)")
    parser.add_argument("--scale", type=float, default=1.0, help="multiplies every steady rate (default 1)")
    parser.add_argument("--limit", type=int, default=20, help="hourly limit per address and per API key")
    parser.add_argument("--budget-usd", type=float, default=0.01, help="the spend server's daily budget")
    parser.add_argument(
        "--write",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="rewrite docs/soak.md and docs/soak-rss.svg (default: only for a run of 10 minutes or more)",
    )
    parser.add_argument("--logs", type=Path, help="copy both servers' logs into this folder")
    args = parser.parse_args()
    if args.minutes <= 0 or args.scale <= 0 or args.limit < 1 or args.budget_usd <= 0:
        parser.error("--minutes, --scale, --limit and --budget-usd must be positive")
    write = args.write if args.write is not None else args.minutes >= 10

    from provenance.inference.pricing import cost_usd
    from provenance.logs import configure_logging
    from provenance.ports import Usage
    from provenance.settings import Settings
    from provenance.store.embedded_pg import start_embedded, stop_embedded
    from tests.fake_anthropic import FAKE_API_KEY, FakeAnthropic, Reply

    configure_logging("warning")
    report = Report(machine=machine(), load_before=load_average(), args=args)
    report.command = " ".join([".venv/bin/python -m bench.soak", *sys.argv[1:]])
    report.nice = os.nice(0)
    started = time.monotonic()
    duration_s = args.minutes * 60
    run = Run(duration_s, args.scale, args.limit)
    # Enough keys that none reaches the limit: each takes at most half of it per hour.
    planned = RATES["API key, uncached"] * args.scale * min(duration_s, 3600)
    key_count = max(2, math.ceil(planned / max(1, args.limit // 2)))
    data_dir = Path(tempfile.mkdtemp(prefix="provenance-soak-"))
    os.environ["DATA_DIR"] = str(data_dir)
    logs: dict[str, list[str]] = {}
    fake = FakeAnthropic().start()
    try:
        dsn = start_embedded(data_dir / "pg")
        os.environ["DATABASE_URL"] = dsn
        servers: list[tuple[str, Server]] = []
        try:
            log("starting the main server (local profile), then the spend server (anthropic profile, fake API)")
            server = Server(
                data_dir,
                RATE_LIMIT_PER_HOUR=str(args.limit),
                RATE_LIMIT_PER_HOUR_API_KEY=str(args.limit),
                # Each simulated client is the address it sends in X-Forwarded-For.
                TRUSTED_PROXIES="127.0.0.1",
            )
            servers.append(("main server", server))
            server.wait_ready()
            # One after the other: two first starts on a fresh database can race in CREATE EXTENSION
            # (api/provenance/db.py ensure_schema), and the loser exits with a UniqueViolationError.
            spend = Server(
                data_dir,
                PROFILE="anthropic",
                ANTHROPIC_API_KEY=FAKE_API_KEY,
                ANTHROPIC_BASE_URL=fake.base_url,
                ANTHROPIC_MAX_RETRIES="0",
                DB_SCHEMA=SPEND_SCHEMA,
                DAILY_BUDGET_USD=str(args.budget_usd),
                RATE_LIMIT_PER_HOUR="100000",
                TRUSTED_PROXIES="127.0.0.1",
            )
            servers.append(("spend server", spend))
            spend.wait_ready()
            asyncio.run(create_keys(dsn, run, key_count))
            server.settle()
            spend.settle()
            log(f"priming the cache with {CACHED_QUESTIONS} questions")
            asyncio.run(prime(run, server))
            fake.requests.clear()
            procs = {
                "server": server.processes(),
                "spend": spend.processes(),
                "postgres": tree(postgres_pid(data_dir)),
                "client": [psutil.Process()],
            }
            before = {name: cpu_s(p) for name, p in procs.items()}
            log(f"{args.minutes:g} minutes of mixed traffic (about {sum(RATES.values()) * args.scale:.0f} req/s)")
            asyncio.run(_with_progress(run, server, spend))
            # Backends started during the run count from zero (psutil sees the ones alive at the end).
            procs["postgres"] = tree(postgres_pid(data_dir))
            report.cpu = {name: cpu_s(p) - before[name] for name, p in procs.items()}
            db = asyncio.run(read_db(dsn))
        finally:
            for name, srv in servers:
                srv.stop()
                logs[name] = Path(srv.log.name).read_text(errors="replace").splitlines()
                if args.logs is not None:
                    args.logs.mkdir(parents=True, exist_ok=True)
                    shutil.copy(srv.log.name, args.logs / f"{name.replace(' ', '-')}.log")
    finally:
        fake.close()
        stop_embedded(data_dir / "pg")
        shutil.rmtree(data_dir, ignore_errors=True)

    # What the spend server reserved per request, as its responses report it (SpendCap's arithmetic).
    estimate = max((h.estimate_usd or 0.0 for h in run.hits if h.kind == "spend client"), default=0.0)
    reply = Reply()  # the fake's token counts per call
    call_cost = cost_usd(Usage(Settings().anthropic.model, reply.input_tokens, reply.output_tokens))
    report.checks, report.log_levels = judge(
        run, duration_s / 2, db, logs, args.budget_usd, estimate, len(fake.requests), call_cost
    )
    report.plain_lines = plain_text_samples(logs)
    report.wall_s = time.monotonic() - started
    report.load_after = load_average()
    text = render(report, run)
    print(text)
    if write:
        DOC.write_text(text)
        SVG.write_text(rss_svg([(t, srv, pg, sp) for t, srv, pg, sp in run.rss], duration_s / 2))
        log(f"wrote {DOC.relative_to(REPO_ROOT)} and {SVG.relative_to(REPO_ROOT)}")
    log("soak PASSED" if report.passed else "soak FAILED: " + ", ".join(c.name for c in report.checks if not c.ok))
    return 0 if report.passed else 1


async def _with_progress(run: Run, server: Server, spend: Server) -> None:
    """The traffic, with a line a minute so a long run shows it is alive."""

    async def ticker() -> None:
        minute = 1
        while True:
            await asyncio.sleep(60)
            done = [h for h in run.hits if minute - 1 <= h.t / 60 < minute]
            srv = run.rss[-1][1] if run.rss else 0.0
            log(f"  minute {minute}: {len(done)} requests, {_counts(h.code for h in done)}; server RSS {srv:.0f} MiB")
            minute += 1

    tick = asyncio.create_task(ticker())
    try:
        await traffic(run, server, spend)
    finally:
        tick.cancel()


if __name__ == "__main__":
    raise SystemExit(main())
