"""The feedback's data access: readers' verdicts and the recent responses they rate."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import msgspec

from provenance.store.pool import MAINTENANCE_TIMEOUT_S, Pooled

# --- readers' feedback: recent responses and their verdicts (007_feedback.sql) ----------------------------


class KeptResponse(msgspec.Struct, frozen=True, gc=False):
    """One served response, as the response log writes it: its columns, its envelope (what this request
    changed) and its body's digest; `body_json` and `settings_json` are written once per digest
    (010_response_bodies.sql). Untracked by Python's collector (gc=False: strings and scalars, no cycle), so
    the rows that wait for a write cost a full collection nothing."""

    request_id: str
    question: str
    corpus: str | None
    corpus_version: str | None
    status: str
    reason: str | None
    cached: bool
    digest: bytes
    settings_json: str
    body_json: str
    envelope_json: str
    # Seconds since the epoch (time.time()): sent as float8, which asyncpg encodes for less than a datetime.
    served_at: float


# A hot body's last_served is refreshed at most this often, so that it costs no write per flush; bodies are
# removed this long after the window, when no row served within the window can still name them.
RESPONSE_BODY_TOUCH_S = 3600.0


class Rated(msgspec.Struct, frozen=True):
    """What a verdict was given on, and whether it replaced the client's earlier one."""

    replaced: bool
    status: str
    rated_at: dt.datetime


class FeedbackRow(msgspec.Struct, frozen=True):
    request_id: str
    verdict: str
    kind: str | None
    note: str
    question: str
    corpus: str | None
    corpus_version: str | None
    status: str
    reason: str | None
    cached: bool
    settings: dict[str, Any]
    response: dict[str, Any]
    served_at: dt.datetime
    updated_at: dt.datetime


class FeedbackCount(msgspec.Struct, frozen=True):
    corpus: str | None
    week: dt.date
    status: str
    verdict: str
    kind: str | None
    n: int


_FEEDBACK_FILTER = " WHERE ($1::timestamptz IS NULL OR updated_at >= $1) AND ($2::text IS NULL OR corpus = $2)"


# asyncpg encodes a statement's arguments in one go, on the event loop that serves the requests: ~7 µs a row,
# so a write of 700 responses held every request for 4-5 ms. In statements of this many rows, ~1 ms at a time.
SERVED_ROWS_A_STATEMENT = 128


async def _insert_served(conn: Any, rows: Sequence[KeptResponse]) -> int:
    """One small row per response; how many were new."""
    kept = await conn.fetchval(
        """
        WITH i AS (
            INSERT INTO served_responses
                (request_id, question, corpus, corpus_version, status, reason, cached, body_digest,
                 envelope, served_at)
            SELECT r, q, c, v, s, why, hit, d, env, to_timestamp(t)
            FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[],
                        $7::boolean[], $8::bytea[], $9::text[], $10::float8[])
                AS u(r, q, c, v, s, why, hit, d, env, t)
            ON CONFLICT (request_id) DO NOTHING
            RETURNING 1
        )
        SELECT count(*) FROM i
        """,
        [r.request_id for r in rows],
        [r.question for r in rows],
        [r.corpus for r in rows],
        [r.corpus_version for r in rows],
        [r.status for r in rows],
        [r.reason for r in rows],
        [r.cached for r in rows],
        [r.digest for r in rows],
        [r.envelope_json for r in rows],
        [r.served_at for r in rows],
    )
    return int(kept)


class FeedbackStore(Pooled):
    """Recent responses (so that they can be rated) and readers' verdicts on them."""

    async def keep_responses(self, rows: Sequence[KeptResponse]) -> int:
        """In one transaction: each distinct body not yet kept, then one small row per response (in statements
        of SERVED_ROWS_A_STATEMENT).
        A request id already kept (a client that reused its X-Request-ID) keeps the response first served
        under it. The envelope is copied as text, cast only where it is read (017_envelope_text.sql)."""
        if not rows:
            return 0
        bodies: dict[bytes, KeptResponse] = {}
        for r in rows:
            bodies.setdefault(r.digest, r)
        async with self._conn(transaction=True) as conn:
            await conn.execute(
                """
                INSERT INTO response_bodies AS b (digest, settings, body, last_served)
                SELECT d, cfg::jsonb, body::jsonb, to_timestamp(t)
                FROM unnest($1::bytea[], $2::text[], $3::text[], $4::float8[]) AS u(d, cfg, body, t)
                ON CONFLICT (digest) DO UPDATE SET last_served = EXCLUDED.last_served
                    WHERE b.last_served < EXCLUDED.last_served - make_interval(secs => $5)
                """,
                list(bodies),
                [b.settings_json for b in bodies.values()],
                [b.body_json for b in bodies.values()],
                [max(r.served_at for r in rows)] * len(bodies),
                RESPONSE_BODY_TOUCH_S,
            )
            kept = 0
            for start in range(0, len(rows), SERVED_ROWS_A_STATEMENT):
                kept += await _insert_served(conn, rows[start : start + SERVED_ROWS_A_STATEMENT])
        return kept

    async def recent_responses_cleanup(self, window_s: int) -> int:
        """Responses served before the window, then the bodies none within it can name."""
        async with self._conn() as conn:
            deleted = await conn.fetchval(
                "WITH d AS (DELETE FROM served_responses WHERE served_at < now() - make_interval(secs => $1)"
                " RETURNING 1) SELECT count(*) FROM d",
                float(window_s),
            )
            await conn.execute(
                "DELETE FROM response_bodies WHERE last_served < now() - make_interval(secs => $1)",
                float(window_s) + 2 * RESPONSE_BODY_TOUCH_S,
            )
        return int(deleted)

    async def rate(
        self, request_id: str, client_hash: str, verdict: str, kind: str | None, note: str, window_s: int
    ) -> Rated | None:
        """Record a client's verdict on a response served within the window, replacing the client's earlier
        verdict on it (and no other client's); None when no such response is kept. One statement, so two
        verdicts sent at once by one client leave one row."""
        async with self._conn() as conn:
            row = await conn.fetchrow(
                """
                INSERT INTO feedback AS f
                    (request_id, client_hash, verdict, kind, note, question, corpus, corpus_version, status,
                     reason, cached, settings, response, served_at)
                SELECT request_id, $2, $3, $4, $5, question, corpus, corpus_version, status, reason, cached,
                    settings, response, served_at
                FROM recent_responses
                WHERE request_id = $1 AND served_at > now() - make_interval(secs => $6)
                ON CONFLICT (request_id, client_hash) DO UPDATE SET
                    verdict = EXCLUDED.verdict, kind = EXCLUDED.kind, note = EXCLUDED.note, updated_at = now()
                RETURNING (f.created_at <> f.updated_at) AS replaced, f.status, f.updated_at
                """,
                request_id,
                client_hash,
                verdict,
                kind,
                note,
                float(window_s),
            )
        if row is None:
            return None
        return Rated(replaced=row["replaced"], status=row["status"], rated_at=row["updated_at"])

    async def feedback_secret(self, candidate: bytes) -> bytes:
        """The HMAC key every worker shares: `candidate` when this is the first to ask, else the kept one."""
        async with self._conn() as conn:
            await conn.execute("INSERT INTO feedback_secret (key) VALUES ($1) ON CONFLICT DO NOTHING", candidate)
            key: bytes = await conn.fetchval("SELECT key FROM feedback_secret")
        return key

    async def feedback(self, since: dt.datetime | None = None, corpus: str | None = None) -> list[FeedbackRow]:
        """Every verdict given (or changed) since `since`, on `corpus` when given, oldest first."""
        async with self._conn() as conn:
            rows = await conn.fetch(
                "SELECT request_id, verdict, kind, note, question, corpus, corpus_version, status, reason, cached,"
                " settings::text AS settings, response::text AS response, served_at, updated_at FROM feedback"
                + _FEEDBACK_FILTER
                + " ORDER BY updated_at, request_id, client_hash",
                since,
                corpus,
                timeout=MAINTENANCE_TIMEOUT_S,
            )
        return [
            FeedbackRow(
                **{
                    **dict(r),
                    "settings": msgspec.json.decode(r["settings"]),
                    "response": msgspec.json.decode(r["response"]),
                }
            )
            for r in rows
        ]

    async def feedback_counts(self, since: dt.datetime | None = None, corpus: str | None = None) -> list[FeedbackCount]:
        """Verdicts by corpus, ISO week (Monday, UTC) of the verdict, status rated, verdict and kind."""
        async with self._conn() as conn:
            rows = await conn.fetch(
                "SELECT corpus, date_trunc('week', updated_at AT TIME ZONE 'UTC')::date AS week, status, verdict,"
                " kind, count(*) AS n FROM feedback"
                + _FEEDBACK_FILTER
                + " GROUP BY 1, 2, 3, 4, 5 ORDER BY 1 NULLS FIRST, 2, 3, 4, 5 NULLS FIRST",
                since,
                corpus,
                timeout=MAINTENANCE_TIMEOUT_S,
            )
        return [FeedbackCount(**dict(r)) for r in rows]
