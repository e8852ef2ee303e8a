"""The guards' data access: API keys, rate-limit windows, the answer cache and the spend ledger."""

from __future__ import annotations

import datetime as dt

import msgspec

from provenance.store.pool import Pooled

# --- the guards' tables: API keys, rate limits, answer cache, spend ledger ---------------------------


class ApiKeyRow(msgspec.Struct, frozen=True):
    name: str
    created_at: dt.datetime
    revoked_at: dt.datetime | None


class RateWindow(msgspec.Struct, frozen=True):
    admitted: bool
    count: int
    seconds_left: float
    window_start: dt.datetime


class CachedAnswer(msgspec.Struct, frozen=True):
    response: str  # the AskResponse as JSON, decoded by the cache guard
    created_at: dt.datetime


class SpendRow(msgspec.Struct, frozen=True):
    spent_usd: float
    reserved_usd: float
    calls: int


# A cached answer's one read; bench/floor_app.py runs the same statement to measure the floor under us.
CACHE_GET_SQL = (
    "SELECT response::text AS response, created_at FROM answer_cache WHERE cache_key = $1 AND expires_at > now()"
)


class GuardStore(Pooled):
    """The guards' tables. Each guard's check-and-update is one statement, so concurrent requests (and
    workers) can't race between reading a counter and writing it back."""

    async def api_key_by_hash(self, key_hash: str) -> ApiKeyRow | None:
        async with self._conn() as conn:
            row = await conn.fetchrow("SELECT name, created_at, revoked_at FROM api_keys WHERE key_hash = $1", key_hash)
        return None if row is None else ApiKeyRow(**dict(row))

    async def create_api_key(self, name: str, key_hash: str) -> bool:
        """False when the name is already taken (revoked names stay taken, so logs stay unambiguous)."""
        async with self._conn() as conn:
            created = await conn.fetchval(
                "INSERT INTO api_keys (name, key_hash) VALUES ($1, $2) ON CONFLICT DO NOTHING RETURNING true",
                name,
                key_hash,
            )
        return bool(created)

    async def revoke_api_key(self, name: str) -> bool:
        """False when there is no active key of that name."""
        async with self._conn() as conn:
            revoked = await conn.fetchval(
                "UPDATE api_keys SET revoked_at = now() WHERE name = $1 AND revoked_at IS NULL RETURNING true",
                name,
            )
        return bool(revoked)

    async def list_api_keys(self) -> list[ApiKeyRow]:
        async with self._conn() as conn:
            rows = await conn.fetch("SELECT name, created_at, revoked_at FROM api_keys ORDER BY name")
        return [ApiKeyRow(**dict(r)) for r in rows]

    async def rate_limit_hit(self, client_key: str, limit: int) -> RateWindow:
        """Count one request in the client's current UTC hour unless it already holds `limit`.

        Only admitted requests are counted, so a refund (`rate_limit_refund`) gives a slot back exactly.
        The check and the count are one statement: ON CONFLICT locks the window's row and re-evaluates
        the WHERE on its latest version, so concurrent requests can't both take the last slot.
        """
        async with self._conn() as conn:
            row = await conn.fetchrow(
                """
                WITH now_hour AS (SELECT date_trunc('hour', now(), 'UTC') AS window_start),
                hit AS (
                    INSERT INTO rate_limits AS r (client_key, window_start, count)
                    SELECT $1, window_start, 1 FROM now_hour
                    ON CONFLICT (client_key, window_start) DO UPDATE SET count = r.count + 1
                    WHERE r.count < $2::int
                    RETURNING r.count
                )
                SELECT (SELECT count FROM hit) AS count, window_start,
                    extract(epoch FROM window_start + interval '1 hour' - now())::float8 AS seconds_left
                FROM now_hour
                """,
                client_key,
                limit,
            )
        assert row is not None
        return RateWindow(
            admitted=row["count"] is not None,
            count=row["count"] if row["count"] is not None else limit,
            seconds_left=row["seconds_left"],
            window_start=row["window_start"],
        )

    async def rate_limit_peek(self, client_key: str, limit: int) -> RateWindow:
        """The client's current window without counting anything: `admitted` says whether a slot is left."""
        async with self._conn() as conn:
            row = await conn.fetchrow(
                """
                WITH now_hour AS (SELECT date_trunc('hour', now(), 'UTC') AS window_start)
                SELECT coalesce(r.count, 0) AS count, n.window_start,
                    extract(epoch FROM n.window_start + interval '1 hour' - now())::float8 AS seconds_left
                FROM now_hour n
                LEFT JOIN rate_limits r ON r.client_key = $1 AND r.window_start = n.window_start
                """,
                client_key,
            )
        assert row is not None
        return RateWindow(
            admitted=row["count"] < limit,
            count=row["count"],
            seconds_left=row["seconds_left"],
            window_start=row["window_start"],
        )

    async def rate_limit_refund(self, client_key: str, window_start: dt.datetime) -> None:
        """Give back one counted request (its answer failed on our side) to the window it was counted in."""
        async with self._conn() as conn:
            await conn.execute(
                "UPDATE rate_limits SET count = count - 1 WHERE client_key = $1 AND window_start = $2 AND count > 0",
                client_key,
                window_start,
            )

    async def rate_limit_count(self, client_key: str) -> int:
        """The requests counted against `client_key` in the current hour (for tests and operators)."""
        async with self._conn() as conn:
            count: int | None = await conn.fetchval(
                "SELECT count FROM rate_limits"
                " WHERE client_key = $1 AND window_start = date_trunc('hour', now(), 'UTC')",
                client_key,
            )
        return count or 0

    async def rate_limit_cleanup(self, older_than_s: int) -> int:
        async with self._conn() as conn:
            deleted = await conn.fetchval(
                "WITH d AS (DELETE FROM rate_limits WHERE window_start < now() - make_interval(secs => $1)"
                " RETURNING 1) SELECT count(*) FROM d",
                float(older_than_s),
            )
        return int(deleted)

    async def cache_get(self, cache_key: str) -> CachedAnswer | None:
        async with self._conn() as conn:
            row = await conn.fetchrow(CACHE_GET_SQL, cache_key)
        return None if row is None else CachedAnswer(response=row["response"], created_at=row["created_at"])

    async def cache_put(
        self, cache_key: str, question: str, response_json: str, ttl_s: int, corpus: str | None = None
    ) -> None:
        async with self._conn() as conn:
            await conn.execute(
                """
                INSERT INTO answer_cache (cache_key, question, response, expires_at, corpus)
                VALUES ($1, $2, $3::jsonb, now() + make_interval(secs => $4), $5)
                ON CONFLICT (cache_key) DO UPDATE SET
                    question = EXCLUDED.question, response = EXCLUDED.response,
                    created_at = now(), expires_at = EXCLUDED.expires_at, corpus = EXCLUDED.corpus
                """,
                cache_key,
                question,
                response_json,
                float(ttl_s),
                corpus,
            )

    async def cache_cleanup(self) -> int:
        async with self._conn() as conn:
            deleted = await conn.fetchval(
                "WITH d AS (DELETE FROM answer_cache WHERE expires_at <= now() RETURNING 1) SELECT count(*) FROM d"
            )
        return int(deleted)

    async def spend_reserve(self, day: dt.date, estimate_usd: float, budget_usd: float) -> SpendRow | None:
        """Hold `estimate_usd` against `day` unless settled + held spend has already reached the budget.

        None when refused. The check and the hold are one statement: ON CONFLICT locks the day's row and
        re-evaluates the WHERE on its latest version, so concurrent reservations queue rather than race,
        and the day can only overshoot the budget by the last admitted request's estimate.
        """
        async with self._conn() as conn:
            row = await conn.fetchrow(
                """
                INSERT INTO spend_ledger AS s (day, reserved_usd)
                SELECT $1, $2::float8 WHERE 0 < $3::float8
                ON CONFLICT (day) DO UPDATE SET
                    reserved_usd = s.reserved_usd + EXCLUDED.reserved_usd, updated_at = now()
                WHERE s.spent_usd + s.reserved_usd < $3::float8
                RETURNING s.spent_usd::float8 AS spent_usd, s.reserved_usd::float8 AS reserved_usd, s.calls
                """,
                day,
                estimate_usd,
                budget_usd,
            )
        return None if row is None else SpendRow(**dict(row))

    async def spend_settle(self, day: dt.date, released_usd: float, cost_usd: float, calls: int) -> SpendRow:
        """Release a reservation and book what the calls really cost, in one statement."""
        async with self._conn() as conn:
            row = await conn.fetchrow(
                """
                INSERT INTO spend_ledger AS s (day, spent_usd, calls) VALUES ($1, $3::float8, $4)
                ON CONFLICT (day) DO UPDATE SET
                    spent_usd = s.spent_usd + EXCLUDED.spent_usd,
                    reserved_usd = greatest(0, s.reserved_usd - $2::float8),
                    calls = s.calls + EXCLUDED.calls,
                    updated_at = now()
                RETURNING s.spent_usd::float8 AS spent_usd, s.reserved_usd::float8 AS reserved_usd, s.calls
                """,
                day,
                released_usd,
                cost_usd,
                calls,
            )
        assert row is not None
        return SpendRow(**dict(row))

    async def spend_day(self, day: dt.date) -> SpendRow | None:
        async with self._conn() as conn:
            row = await conn.fetchrow(
                "SELECT spent_usd::float8 AS spent_usd, reserved_usd::float8 AS reserved_usd, calls"
                " FROM spend_ledger WHERE day = $1",
                day,
            )
        return None if row is None else SpendRow(**dict(row))
