"""The service's Prometheus metrics: what is counted, where, and what a scrape of GET /metrics returns.

Counted where it happens, once:
- every /ask outcome, by status and reason, cached or not, with its stage latencies and the cache lookup:
  `PrometheusObserver`, which `Pipeline.ask` tells each answer it returns (the streamed /ask included);
- model calls, where a profile makes them (`model_call`), and model errors by call and kind, where the
  pipeline turns them into `model_error` (the observer);
- the admission queue's running and waiting, whenever they change (the observer);
- `overloaded` answers and database unavailability, where they become 503s (provenance.http.exceptions;
  /healthz's "database down" too);
- every HTTP response by route template and status (`count_response`, a before_send hook);
- readers' verdicts by the rated response's status, verdict and kind, where POST /feedback keeps them
  (provenance.feedback.desk).

Spend today and the budget are not counted at all: each scrape reads them from the database ledger, which
is the truth whichever worker paid (`scrape`).

Several workers (`provenance serve --workers N`) each count in their own process. `serve` gives them one
PROMETHEUS_MULTIPROC_DIR (prometheus-client's multiprocess mode): every worker writes its counts to files
there and a scrape, answered by any one worker, adds up all of them. The gauges are summed over the live
workers (`livesum`); a worker that stops removes its own (`worker_stopped`).
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import Iterable, Sequence
from typing import Any, get_args

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest, values
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead
from prometheus_client.registry import REGISTRY, Collector

from provenance.errors import ModelError, Overloaded
from provenance.settings import Settings
from provenance.store.guards import GuardStore
from provenance.wire import AskResponse, Reason, Stages

# Stage latencies run from a cached answer's fraction of a millisecond to a slow model call's tens of seconds.
SECONDS_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30)
REFUSED_REASONS: tuple[Reason, ...] = ("not_grounded", "not_an_answer", "no_answer")
BLOCKED_REASONS: tuple[Reason, ...] = tuple(r for r in get_args(Reason) if r not in REFUSED_REASONS)
# A cached answer carries the stage records of the run that first answered it; only these ran again.
CACHED_RUN_STAGES = ("bot_check", "cache")

HTTP_REQUESTS = Counter(
    "provenance_http_requests", "HTTP responses by route template (not the raw path) and status", ["route", "status"]
)
ASK_OUTCOMES = Counter(
    "provenance_ask_outcomes",
    "/ask answers by what happened: status (answered, refused, blocked), reason (none when answered), and "
    "whether it was served from the cache; a streamed answer counts the same as any other",
    ["status", "reason", "cached"],
)
ASK_SECONDS = Histogram(
    "provenance_ask_seconds", "/ask time in the pipeline (totalMs)", ["cached"], buckets=SECONDS_BUCKETS
)
STAGE_SECONDS = Histogram(
    "provenance_stage_seconds",
    "Each pipeline stage's time, from the stage records of the answers (stages that ran in this request only)",
    ["stage"],
    buckets=SECONDS_BUCKETS,
)
CACHE_LOOKUPS = Counter("provenance_cache_lookups", "Answer cache lookups by result (hit, miss)", ["result"])
ADMISSION_RUNNING = Gauge(
    "provenance_admission_running", "Pipelines running now, all workers", multiprocess_mode="livesum"
)
ADMISSION_WAITING = Gauge(
    "provenance_admission_waiting",
    "Questions waiting for a pipeline slot now, all workers",
    multiprocess_mode="livesum",
)
ADMISSION_SLOTS = Gauge(
    "provenance_admission_slots", "Pipeline slots (ASK_CONCURRENCY), summed over workers", multiprocess_mode="livesum"
)
ADMISSION_QUEUE_MAX = Gauge(
    "provenance_admission_queue_max",
    "Questions allowed to wait (ASK_QUEUE_MAX), summed over workers",
    multiprocess_mode="livesum",
)
OVERLOADED = Counter("provenance_overloaded", "503 overloaded answers (no pipeline slot, or no pooled connection)")
MODEL_CALLS = Counter(
    "provenance_model_calls",
    "Model calls made (the hosted profiles' and the reading judge's, paid or not), by call",
    ["call"],
)
MODEL_ERRORS = Counter(
    "provenance_model_errors",
    "Model errors that ended a request blocked: model_error for the writer's calls, judge_error for call=judge; "
    "by call and kind",
    ["call", "kind"],
)
FEEDBACK = Counter(
    "provenance_feedback",
    "Readers' verdicts (POST /feedback) by the status of the response rated (answered, refused), verdict "
    "(right, wrong) and kind (wrong_answer, should_have_answered, other; none for right); a changed verdict "
    "is counted again under its new one",
    ["status", "verdict", "kind"],
)
DATABASE_UNAVAILABLE = Counter(
    "provenance_database_unavailable",
    "Database outages met: 503 database_unavailable answers (source=request) and /healthz finding it down",
    ["source"],
)


def _children(metric: Any, *label_sets: Sequence[str]) -> dict[tuple[str, ...], Any]:
    # Created up front: a series that exists at zero makes rate() and increase() see its first event, and a
    # dict lookup is cheaper than `labels()` on the cached path.
    return {tuple(labels): metric.labels(*labels) for labels in label_sets}


_OUTCOMES = _children(
    ASK_OUTCOMES,
    *(("answered", "none", c) for c in ("false", "true")),
    *(("refused", r, c) for r in REFUSED_REASONS for c in ("false", "true")),
    *(("blocked", r, "false") for r in BLOCKED_REASONS),
)
_ASK_SECONDS = _children(ASK_SECONDS, ("false",), ("true",))
_STAGES = {name: STAGE_SECONDS.labels(name) for name in Stages.__struct_fields__}
_CACHE = _children(CACHE_LOOKUPS, ("hit",), ("miss",))
_HTTP: dict[tuple[str, int], Any] = {}
_FEEDBACK = _children(
    FEEDBACK,
    *(
        (status, verdict, kind)
        for status in ("answered", "refused")
        for verdict, kind in (
            ("right", "none"),
            ("wrong", "none"),
            ("wrong", "wrong_answer"),
            ("wrong", "should_have_answered"),
            ("wrong", "other"),
        )
    ),
)
OVERLOADED.inc(0)
for _source in ("request", "healthz"):
    DATABASE_UNAVAILABLE.labels(_source)


def multiprocess() -> bool:
    """Whether this process counts into PROMETHEUS_MULTIPROC_DIR: decided by prometheus-client when it was
    first imported, so asked of it rather than of the environment now."""
    return values.ValueClass is not values.MutexValue


class PrometheusObserver:
    """The pipeline's observer (provenance.pipeline.observe.AskObserver) that counts into the metrics above."""

    def __init__(self, settings: Settings) -> None:
        ADMISSION_SLOTS.set(settings.server.ask_concurrency)
        ADMISSION_QUEUE_MAX.set(settings.server.ask_queue_max)
        ADMISSION_RUNNING.set(0)
        ADMISSION_WAITING.set(0)

    def outcome(self, response: AskResponse) -> None:
        cached = "true" if response.cached else "false"
        key = (response.status, response.reason or "none", cached)
        child = _OUTCOMES.get(key) or ASK_OUTCOMES.labels(*key)
        child.inc()
        _ASK_SECONDS[(cached,)].observe(response.total_ms / 1000)
        stages = response.stages
        lookup = stages.cache.status
        if lookup == "hit" or lookup == "miss":
            _CACHE[(lookup,)].inc()
        for name in CACHED_RUN_STAGES if response.cached else Stages.__struct_fields__:
            stage = getattr(stages, name)
            if stage.status != "skipped":
                _STAGES[name].observe(stage.ms / 1000)

    def model_error(self, error: ModelError) -> None:
        MODEL_ERRORS.labels(error.call, error.kind).inc()

    def admission(self, running: int, waiting: int) -> None:
        ADMISSION_RUNNING.set(running)
        ADMISSION_WAITING.set(waiting)


def model_call(call: str) -> None:
    MODEL_CALLS.labels(call).inc()


def overloaded() -> None:
    OVERLOADED.inc()


def feedback_given(status: str, verdict: str, kind: str | None) -> None:
    key = (status, verdict, kind or "none")
    (_FEEDBACK.get(key) or FEEDBACK.labels(*key)).inc()


def database_unavailable(source: str) -> None:
    DATABASE_UNAVAILABLE.labels(source).inc()


def count_response(route: str, status: int) -> None:
    key = (route, status)
    child = _HTTP.get(key)
    if child is None:
        child = _HTTP[key] = HTTP_REQUESTS.labels(route, str(status))
    child.inc()


def worker_stopped() -> None:
    """A worker's live gauges go with it (its counters stay: what it counted happened)."""
    if multiprocess():
        mark_process_dead(os.getpid())


# --- a scrape ------------------------------------------------------------------------------------------


class _Fixed(Collector):
    def __init__(self, families: Iterable[Metric]) -> None:
        self._families = list(families)

    def collect(self) -> Iterable[Metric]:
        return self._families


class _ThisProcess(Collector):
    """The process's own registry, for a server running without multiprocess mode (tests, one in-process app)."""

    def collect(self) -> Iterable[Metric]:
        return REGISTRY.collect()


async def ledger(store: GuardStore, settings: Settings) -> list[Metric]:
    """Today's spend and the budget, read from the ledger now, and whether the database answered."""
    from provenance.guards.spend import utc_day

    budget = settings.guards.daily_budget_usd
    families: list[Metric] = [
        GaugeMetricFamily("provenance_spend_budget_usd", "The daily budget for paid model calls", value=budget)
    ]
    up = 1.0
    try:
        row = await asyncio.wait_for(store.spend_day(utc_day()), timeout=2 * settings.database.timeout_s)
    except Overloaded:
        row = None  # every pooled connection is busy: the database is up, this scrape just can't read it
    except Exception:
        row, up = None, 0.0
    else:
        families += [
            GaugeMetricFamily(
                "provenance_spend_today_usd",
                "Spend settled today (UTC), from the database ledger",
                value=row.spent_usd if row else 0.0,
            ),
            GaugeMetricFamily(
                "provenance_spend_reserved_usd",
                "Spend held by requests in flight now, from the database ledger",
                value=row.reserved_usd if row else 0.0,
            ),
        ]
    families.append(
        GaugeMetricFamily("provenance_database_up", "1 when the database answered this scrape's ledger read", value=up)
    )
    return families


async def scrape(store: GuardStore, settings: Settings) -> bytes:
    """The text exposition: every worker's counts (or this process's) and the ledger's figures."""
    registry = CollectorRegistry()
    if multiprocess():
        MultiProcessCollector(registry)
    else:
        registry.register(_ThisProcess())
    registry.register(_Fixed(await ledger(store, settings)))
    # Reading every worker's files is blocking I/O: off the event loop.
    return await asyncio.to_thread(generate_latest, registry)
