"""The floor for a cached `/ask`: a bare Litestar app that runs only the SQL a cached answer needs and
returns the stored body as it is.

    DATA_DIR=... python -m uvicorn bench.floor_app:create_app --factory --port 8001

It joins the same Postgres as `provenance serve` (DATABASE_URL, else the embedded server under DATA_DIR)
and the same schema, reads which cache key each cached question has once at start-up (the real server
computes it from the question, the corpus version and the settings; that costs no SQL), and then per
request decodes the JSON body, looks the key up and runs the real server's cache read
(`GuardStore.cache_get`'s statement). No middleware, no pipeline, no decode or re-encode of the answer. What
the real server spends beyond this is ours to justify.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import asyncpg
import msgspec
from litestar import Litestar, Request, Response, post

from provenance.settings import load_settings
from provenance.store.guards import CACHE_GET_SQL
from provenance.store.pool import create_pool, resolve_database_url


class _Ask(msgspec.Struct):
    question: str


_decode_ask = msgspec.json.Decoder(_Ask).decode


@post("/ask", status_code=200)
async def ask(request: Request[Any, Any, Any]) -> Response[bytes]:
    state = request.app.state
    question = _decode_ask(await request.body()).question.strip()
    key = state.cache_keys.get(question)
    pool: asyncpg.Pool = state.pool
    row = None if key is None else await pool.fetchrow(CACHE_GET_SQL, key)
    if row is None:
        return Response(b'{"error":"not cached"}', status_code=404, media_type="application/json")
    return Response(row["response"].encode(), media_type="application/json")


@asynccontextmanager
async def lifespan(app: Litestar) -> AsyncIterator[None]:
    settings = load_settings()
    pool = await create_pool(resolve_database_url(settings), settings)
    rows = await pool.fetch("SELECT question, cache_key FROM answer_cache WHERE expires_at > now()")
    app.state.pool = pool
    app.state.cache_keys = {r["question"]: r["cache_key"] for r in rows}
    try:
        yield
    finally:
        await pool.close()


def create_app() -> Litestar:
    return Litestar(route_handlers=[ask], lifespan=[lifespan], debug=False)
