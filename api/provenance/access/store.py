"""The access tables' statements (db/migrations/012_access.sql): keys' roles and grants, and corpora as
created, with their visibility. Over the same pool as the other stores."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import Any

import msgspec

from provenance.access.clients import Client, GrantRole, Role, Visibility
from provenance.store.pool import Pooled


class KeyAccess(msgspec.Struct, frozen=True):
    """A key as a request presents it: who, whether it still counts, and what it may read."""

    name: str
    revoked_at: dt.datetime | None
    client: Client


class KeyRow(msgspec.Struct, frozen=True):
    name: str
    role: Role
    created_at: dt.datetime
    revoked_at: dt.datetime | None
    grants: dict[str, GrantRole]


class CorpusAccess(msgspec.Struct, frozen=True):
    name: str
    visibility: Visibility
    title: str


# The private corpora, read with every request that looks at a corpus: a handful of rows, from a partial index.
_PRIVATE = "SELECT coalesce(array_agg(name), '{}') FROM corpus_access WHERE visibility = 'private'"
_GRANTS = (
    "(SELECT coalesce(jsonb_object_agg(g.corpus, g.role), '{}'::jsonb)::text FROM key_grants g"
    " WHERE g.key_name = k.name)"
)


class AccessStore(Pooled):
    async def key_by_hash(self, key_hash: str) -> KeyAccess | None:
        """The key, its grants and the private corpora, in one statement: the round trip the key check made."""
        async with self._conn() as conn:
            row = await conn.fetchrow(
                f"SELECT k.name, k.role, k.revoked_at, {_GRANTS} AS grants, ({_PRIVATE}) AS private"
                " FROM api_keys k WHERE k.key_hash = $1",
                key_hash,
            )
        if row is None:
            return None
        client = Client(
            key=row["name"],
            role=row["role"],
            grants=msgspec.json.decode(row["grants"], type=dict[str, GrantRole]),
            private=frozenset(row["private"]),
        )
        return KeyAccess(name=row["name"], revoked_at=row["revoked_at"], client=client)

    async def private_corpora(self) -> frozenset[str]:
        async with self._conn() as conn:
            names: list[str] = await conn.fetchval(_PRIVATE)
        return frozenset(names)

    async def create_key(self, name: str, key_hash: str, role: Role, grants: Sequence[str]) -> bool:
        """The key with its grants (each at the key's role, an admin's as an editor's), in one transaction;
        False when the name is taken (revoked names stay taken)."""
        grant_role = "reader" if role == "reader" else "editor"
        async with self._conn(transaction=True) as conn:
            created = await conn.fetchval(
                "INSERT INTO api_keys (name, key_hash, role) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING RETURNING true",
                name,
                key_hash,
                role,
            )
            if created:
                await conn.execute(
                    "INSERT INTO key_grants (key_name, corpus, role) SELECT $1, c, $3 FROM unnest($2::text[]) AS c"
                    " ON CONFLICT DO NOTHING",
                    name,
                    list(grants),
                    grant_role,
                )
        return bool(created)

    async def key(self, name: str) -> KeyRow | None:
        async with self._conn() as conn:
            row = await conn.fetchrow(
                f"SELECT k.name, k.role, k.created_at, k.revoked_at, {_GRANTS} AS grants FROM api_keys k"
                " WHERE k.name = $1",
                name,
            )
        return None if row is None else _key_row(row)

    async def keys(self) -> list[KeyRow]:
        async with self._conn() as conn:
            rows = await conn.fetch(
                f"SELECT k.name, k.role, k.created_at, k.revoked_at, {_GRANTS} AS grants FROM api_keys k"
                " ORDER BY k.name"
            )
        return [_key_row(r) for r in rows]

    async def grant(self, key: str, corpus: str, role: GrantRole) -> bool:
        """Give (or change) a key's right on a corpus; False when there is no active key of that name."""
        async with self._conn() as conn:
            granted = await conn.fetchval(
                "INSERT INTO key_grants (key_name, corpus, role)"
                " SELECT name, $2, $3 FROM api_keys WHERE name = $1 AND revoked_at IS NULL"
                " ON CONFLICT (key_name, corpus) DO UPDATE SET role = EXCLUDED.role, granted_at = now()"
                " RETURNING true",
                key,
                corpus,
                role,
            )
        return bool(granted)

    async def ungrant(self, key: str, corpus: str) -> bool:
        async with self._conn() as conn:
            removed = await conn.fetchval(
                "DELETE FROM key_grants WHERE key_name = $1 AND corpus = $2 RETURNING true", key, corpus
            )
        return bool(removed)

    async def create_corpus(self, name: str, visibility: Visibility, title: str, *, exists: bool) -> bool:
        """Record a new corpus; False when it is recorded already or `exists` (it holds passages already). A
        corpus's visibility is set once, here: a public corpus made private later would have been read as
        public by whoever looked before, and a server's look at the corpora may be seconds old."""
        if exists:
            return False
        async with self._conn() as conn:
            created = await conn.fetchval(
                "INSERT INTO corpus_access (name, visibility, title) VALUES ($1, $2, $3)"
                " ON CONFLICT DO NOTHING RETURNING true",
                name,
                visibility,
                title,
            )
        return bool(created)

    async def corpus_access(self) -> dict[str, CorpusAccess]:
        async with self._conn() as conn:
            rows = await conn.fetch("SELECT name, visibility, title FROM corpus_access")
        return {r["name"]: CorpusAccess(**dict(r)) for r in rows}

    async def forget_corpus(self, name: str) -> bool:
        """A removed corpus's record and the grants on it: a corpus made again later under the name starts
        afresh, and no key keeps a right on it."""
        async with self._conn(transaction=True) as conn:
            await conn.execute("DELETE FROM key_grants WHERE corpus = $1", name)
            forgot = await conn.fetchval("DELETE FROM corpus_access WHERE name = $1 RETURNING true", name)
        return bool(forgot)

    async def response_corpus(self, request_id: str) -> str | None:
        """The corpus an answer kept for feedback was given from (recent_responses), None when none is kept."""
        async with self._conn() as conn:
            corpus: str | None = await conn.fetchval(
                "SELECT corpus FROM recent_responses WHERE request_id = $1", request_id
            )
        return corpus


def _key_row(row: Any) -> KeyRow:
    return KeyRow(
        name=row["name"],
        role=row["role"],
        created_at=row["created_at"],
        revoked_at=row["revoked_at"],
        grants=msgspec.json.decode(row["grants"], type=dict[str, GrantRole]),
    )
