"""The conversations' SQL (db/migrations/011_conversations.sql), parameterised, over the service's pool."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence

import msgspec

from provenance.ports import ScoredPassage
from provenance.store.pool import Pooled


class ConversationRow(msgspec.Struct, frozen=True):
    id: str
    owner_hash: str
    corpus: str
    created_at: dt.datetime
    expires_at: dt.datetime


class TurnRow(msgspec.Struct, frozen=True):
    conversation_id: str
    turn: int
    request_id: str
    question: str
    standalone_question: str
    status: str
    reason: str | None
    answer: str | None
    citations_json: str
    passage_ids: list[str]
    created_at: dt.datetime


class StoredConversation(msgspec.Struct, frozen=True):
    conversation: ConversationRow
    turns: list[TurnRow]


class ConversationStore(Pooled):
    async def keep(self, conversations: Sequence[ConversationRow], turns: Sequence[TurnRow]) -> int:
        """One transaction for a batch: each conversation made or its expiry moved on, then its turns. A turn
        number already kept (two follow-ups sent at once) keeps the first written."""
        if not turns:
            return 0
        async with self._conn(transaction=True) as conn:
            await conn.execute(
                """
                INSERT INTO conversations AS c (id, owner_hash, corpus, created_at, expires_at)
                SELECT * FROM unnest($1::text[], $2::text[], $3::text[], $4::timestamptz[], $5::timestamptz[])
                ON CONFLICT (id) DO UPDATE SET expires_at = GREATEST(c.expires_at, EXCLUDED.expires_at)
                """,
                [c.id for c in conversations],
                [c.owner_hash for c in conversations],
                [c.corpus for c in conversations],
                [c.created_at for c in conversations],
                [c.expires_at for c in conversations],
            )
            kept = await conn.fetchval(
                """
                WITH i AS (
                    INSERT INTO conversation_turns
                        (conversation_id, turn, request_id, question, standalone_question, status, reason, answer,
                         citations, passage_ids, created_at)
                    SELECT c, n, r, q, sq, s, why, a, cit::jsonb, string_to_array(p, E'\\x1f'), t
                    FROM unnest($1::text[], $2::int[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[],
                                $8::text[], $9::text[], $10::text[], $11::timestamptz[])
                        AS u(c, n, r, q, sq, s, why, a, cit, p, t)
                    ON CONFLICT (conversation_id, turn) DO NOTHING
                    RETURNING 1
                )
                SELECT count(*) FROM i
                """,
                [t.conversation_id for t in turns],
                [t.turn for t in turns],
                [t.request_id for t in turns],
                [t.question for t in turns],
                [t.standalone_question for t in turns],
                [t.status for t in turns],
                [t.reason for t in turns],
                [t.answer for t in turns],
                [t.citations_json for t in turns],
                # unnest can't take an array of arrays of different lengths: each turn's ids as one string.
                ["\x1f".join(t.passage_ids) for t in turns],
                [t.created_at for t in turns],
            )
        return int(kept)

    async def find(self, conversation_id: str) -> StoredConversation | None:
        """The conversation with its turns in order, unless it has expired."""
        async with self._conn() as conn:
            row = await conn.fetchrow(
                "SELECT id, owner_hash, corpus, created_at, expires_at FROM conversations"
                " WHERE id = $1 AND expires_at > now()",
                conversation_id,
            )
            if row is None:
                return None
            turns = await conn.fetch(
                "SELECT conversation_id, turn, request_id, question, standalone_question, status, reason, answer,"
                " citations::text AS citations_json, passage_ids, created_at FROM conversation_turns"
                " WHERE conversation_id = $1 ORDER BY turn",
                conversation_id,
            )
        return StoredConversation(ConversationRow(**dict(row)), [TurnRow(**dict(t)) for t in turns])

    async def forget(self, conversation_id: str, owner_hash: str) -> bool:
        async with self._conn() as conn:
            deleted = await conn.fetchval(
                "WITH d AS (DELETE FROM conversations WHERE id = $1 AND owner_hash = $2 AND expires_at > now()"
                " RETURNING 1) SELECT count(*) FROM d",
                conversation_id,
                owner_hash,
            )
        return bool(deleted)

    async def cleanup(self) -> int:
        async with self._conn() as conn:
            deleted = await conn.fetchval(
                "WITH d AS (DELETE FROM conversations WHERE expires_at <= now() RETURNING 1) SELECT count(*) FROM d"
            )
        return int(deleted)

    async def passages(self, corpus: str, ids: Sequence[str]) -> list[ScoredPassage]:
        """Passages by id, in the order asked, as retrieval hands them on (score 0: carried, not retrieved)."""
        if not ids:
            return []
        async with self._conn() as conn:
            rows = await conn.fetch(
                "SELECT id, source, heading, text, CASE WHEN first_page IS NULL THEN NULL ELSE"
                " ARRAY(SELECT generate_series(first_page, last_page)) END AS pages"
                " FROM passages WHERE corpus = $1 AND id = ANY($2::text[])",
                corpus,
                list(ids),
            )
        found = {r["id"]: r for r in rows}
        return [
            ScoredPassage(
                id=r["id"], source=r["source"], heading=r["heading"], text=r["text"], score=0.0, pages=r["pages"]
            )
            for pid in ids
            if (r := found.get(pid)) is not None
        ]
