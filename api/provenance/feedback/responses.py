"""The response log: every answered or refused /ask response, cached ones included, kept in
recent_responses for FEEDBACK_WINDOW_S so that a reader can rate it.

`keep` is all the request path pays: the response goes onto a list. A task of the log's own writes the list
every FEEDBACK_FLUSH_MS in one transaction (a cached answer is served in well under a millisecond, and a write
of its own per hit would cost more than the hit). What waits in memory is lost if the process dies before the
next write: such a response can't be rated (404 unknown_request), which is all it costs. Shutdown writes it.

The write must never hold a request (issue 48). Two things did: the flush encoded the whole batch in one go
on the event loop (20-30 ms for 700 responses), and Postgres parsed and compressed 7 kB of jsonb per response,
half a second of a core per flush at 1,400 cached answers a second, on the cores that serve them. So the batch
is encoded in slices with the loop let go between them, and each response is split into its body (the
response with its per-request fields at their defaults: the same for every hit of one cache entry) and its
envelope (request id, total time, the door's stages), and a body is written once per digest. A cached
answer's body is encoded and hashed once per cache entry it was served from, not once per hit (`_Bodies`).
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from typing import Any

import msgspec

from provenance.guards.sweep import Sweeper
from provenance.logs import get_logger
from provenance.settings import Settings
from provenance.store.feedback import FeedbackStore, KeptResponse
from provenance.store.write_behind import WriteBehind
from provenance.wire import AdmissionStage, AskResponse, BotCheckStage, CacheStage, RateLimitStage, Wire

log = get_logger("provenance.feedback")

# Enough for ten seconds of cached traffic at full speed while the database is away; a decoded response holds
# about 12 kB, so this bounds the log near 240 MB (it was 50,000, 600 MB). Beyond it the oldest go unkept.
MAX_PENDING = 20_000
CLEANUP_EVERY_S = 600.0
# Responses encoded between two yields to the event loop: ~2 ms of work, well under a cached answer's p99.
SLICE = 64
# How often what waits is encoded into rows, apart from how often rows are written (FEEDBACK_FLUSH_MS). A kept
# response is dozens of objects Python's collector tracks; held for a whole flush interval they survived into
# its oldest generation, whose full collections then walked the whole heap and held every request for
# 100-150 ms every few seconds. Encoded within 20 ms they die young, and the rows are untracked strings.
ENCODE_EVERY_S = 0.02
# Cache entries whose encoded body and digest are remembered; beyond it the oldest is forgotten (a body is ~7 kB).
BODIES_REMEMBERED = 256

_encoder = msgspec.json.Encoder()


def served_settings(settings: Settings, profile: str, cache_tag: str = "") -> dict[str, Any]:
    """What an answer depended on besides its corpus, by the variables' names (README), so that an exported
    case can say what differed: `GATE_THRESHOLD was 0.6, is 0.7`."""
    return {
        "PROFILE": profile,
        "MODEL": settings.profile_model,
        "LOCAL_VERIFIER": settings.local_verifier,
        "LOCAL_GENERATOR": settings.local_generator,
        "JUDGE": f"{settings.judge.name}:{settings.judge.model or ''}" if settings.judge.enabled else "rules",
        "EMBED_MODEL": settings.embedding.model,
        "RETRIEVAL_K": settings.retrieval.k,
        "RETRIEVAL_MODE": settings.retrieval.mode,
        "GATE_THRESHOLD": settings.gate.threshold,
        "GATE_MIN_CLAIM": settings.gate.min_claim,
        "GATE_RELEVANCE": settings.gate.relevance,
        "GATE_RELEVANCE_UNCERTAIN": settings.gate.relevance_uncertain,
        # The profile's models by their own tag: not a variable, so only compared where both have one.
        "cacheTag": cache_tag,
    }


class ResponseLog:
    def __init__(self, store: FeedbackStore, settings: Settings, served: dict[str, Any]) -> None:
        self.store = store
        self.window_s = settings.feedback.window_s
        self._settings_json = _encoder.encode(served).decode()
        self._settings_key = hashlib.blake2b(self._settings_json.encode()).digest()
        self._pending: list[tuple[AskResponse, float, str | None]] = []  # kept, not encoded yet
        self._bodies = _Bodies(self._settings_key)
        sweeper = Sweeper("recent responses", CLEANUP_EVERY_S, lambda: store.recent_responses_cleanup(self.window_s))
        self._batch = WriteBehind(
            "response-log",
            store.keep_responses,
            flush_s=settings.feedback.flush_ms / 1000,
            max_pending=MAX_PENDING,
            after_write=sweeper.maybe_run,
            prepare=self._encode,
            prepare_every_s=ENCODE_EVERY_S,
        )
        self.flush = self._batch.flush
        self.aclose = self._batch.aclose

    @property
    def flush_s(self) -> float:
        return self._batch.flush_s

    def keep(self, response: AskResponse, served_from: str | None = None) -> None:
        """Called once per response, in the request's task; never waits. A blocked request is not rated.
        `served_from`: the cache entry a cached answer was served from (`Outcome.served_from`), whose body is
        then encoded once for all its hits."""
        if response.status == "blocked":
            return
        self._pending.append((response, time.time(), served_from))
        drop = self._batch.add((), also_waiting=len(self._pending))
        if drop:
            del self._pending[:drop]

    @property
    def pending(self) -> int:
        return len(self._pending) + len(self._batch.rows)

    async def _encode(self) -> None:
        """What waits, as rows: SLICE at a time, the loop let go between slices."""
        batch, self._pending = self._pending, []
        for start in range(0, len(batch), SLICE):
            if start:
                await asyncio.sleep(0)  # let the requests that arrived meanwhile run
            self._batch.rows.extend(
                _row(response, at, self._settings_json, self._bodies.of(response, served_from))
                for response, at, served_from in batch[start : start + SLICE]
            )


class _DoorStages(Wire):
    bot_check: BotCheckStage
    cache: CacheStage
    rate_limit: RateLimitStage
    admission: AdmissionStage


class _Envelope(Wire):
    """What differs between two hits of one cache entry: merged back over the body by recent_responses
    (010_response_bodies.sql), keys as AskResponse encodes them."""

    request_id: str
    cached: bool
    total_ms: float
    stages: _DoorStages
    # The request's conversation (issue 44): a new one on every first turn, so never part of a shared body.
    conversation_id: str | None
    turn: int | None
    standalone_question: str | None


_DEFAULT_DOOR = {"bot_check": BotCheckStage(), "cache": CacheStage(), "rate_limit": RateLimitStage()}


class _Body(msgspec.Struct, frozen=True, gc=False):
    """A response's body as written (010_response_bodies.sql) and its digest."""

    json: str
    digest: bytes


class _Bodies:
    """The bodies of responses, remembered per cache entry: every hit of one entry is the same response but for
    what its envelope holds (`Run.cached`), so its body is encoded and hashed once, not on every hit (11-20 µs
    of a 7 kB body each time, issue 48)."""

    def __init__(self, settings_key: bytes) -> None:
        self._settings_key = settings_key
        self._of_entry: dict[str, _Body] = {}

    def of(self, response: AskResponse, served_from: str | None) -> _Body:
        if served_from is None:
            return _body(response, self._settings_key)
        body = self._of_entry.get(served_from)
        if body is None:
            if len(self._of_entry) >= BODIES_REMEMBERED:
                del self._of_entry[next(iter(self._of_entry))]  # the oldest entry
            body = self._of_entry[served_from] = _body(response, self._settings_key)
        return body


def _body(response: AskResponse, settings_key: bytes) -> _Body:
    """The response with its per-request fields at their defaults, the same for every hit of one cache entry."""
    body = msgspec.structs.replace(
        response,
        request_id="",
        cached=False,
        total_ms=0.0,
        stages=msgspec.structs.replace(response.stages, **_DEFAULT_DOOR, admission=AdmissionStage()),
        conversation_id=None,
        turn=None,
        standalone_question=None,
    )
    body_json = _encoder.encode(body)
    # Keyed by the settings' own digest: one body answered under other settings is another row.
    return _Body(body_json.decode(), hashlib.blake2b(body_json, digest_size=16, key=settings_key).digest())


def _row(response: AskResponse, at: float, settings_json: str, body: _Body) -> KeptResponse:
    stages = response.stages
    envelope = _Envelope(
        request_id=response.request_id,
        cached=response.cached,
        total_ms=response.total_ms,
        stages=_DoorStages(
            bot_check=stages.bot_check, cache=stages.cache, rate_limit=stages.rate_limit, admission=stages.admission
        ),
        conversation_id=response.conversation_id,
        turn=response.turn,
        standalone_question=response.standalone_question,
    )
    return KeptResponse(
        request_id=response.request_id,
        question=response.question,
        corpus=response.corpus,
        corpus_version=response.corpus_version,
        status=response.status,
        reason=response.reason,
        cached=response.cached,
        digest=body.digest,
        settings_json=settings_json,
        body_json=body.json,
        envelope_json=_encoder.encode(envelope).decode(),
        served_at=at,
    )
