"""The turn log: every turn's write, off the request path, batched as the feedback response log batches
(provenance.feedback.responses): `keep` appends to a list, and a task of the log's own writes the list every
CONVERSATION_FLUSH_MS in one transaction. A follow-up or a GET of the same conversation on this worker
writes what waits first (`flush`), so it always sees its earlier turns; on another worker a turn is seen
within CONVERSATION_FLUSH_MS. What waits is lost if the process dies before the next write: that turn's
follow-up is a 404, which is all it costs. Expired conversations are swept after a write."""

from __future__ import annotations

from provenance.guards.sweep import Sweeper
from provenance.store.conversations import ConversationRow, ConversationStore, TurnRow
from provenance.store.write_behind import WriteBehind

# Enough for minutes of traffic while the database is away; beyond it the oldest go unkept.
MAX_PENDING = 50_000
CLEANUP_EVERY_S = 600.0


class TurnLog:
    def __init__(self, store: ConversationStore, flush_ms: float) -> None:
        self.store = store
        sweeper = Sweeper("expired conversations", CLEANUP_EVERY_S, store.cleanup)
        self._batch: WriteBehind[tuple[ConversationRow, TurnRow]] = WriteBehind(
            "turn-log", self._write, flush_s=flush_ms / 1000, max_pending=MAX_PENDING, after_write=sweeper.maybe_run
        )
        self.flush = self._batch.flush
        self.aclose = self._batch.aclose

    def keep(self, conversation: ConversationRow, turn: TurnRow) -> None:
        """Called once per turn, in the request's task; never waits."""
        self._batch.add([(conversation, turn)])

    def waiting(self, conversation_id: str) -> bool:
        """Whether a turn of this conversation is not written yet: `flush` then waits until it is."""
        return any(c.id == conversation_id for c, _ in (*self._batch.rows, *self._batch.writing))

    async def _write(self, batch: list[tuple[ConversationRow, TurnRow]]) -> int:
        # A conversation's row once per batch, with the latest expiry of its turns.
        latest: dict[str, ConversationRow] = {}
        for conversation, _ in batch:
            seen = latest.get(conversation.id)
            if seen is None or conversation.expires_at > seen.expires_at:
                latest[conversation.id] = conversation
        return await self.store.keep(list(latest.values()), [t for _, t in batch])
