"""The turn log: every turn's write, off the request path, batched as the feedback response log batches
(provenance.feedback.responses): `keep` appends to a list, and a task of the log's own writes the list every
CONVERSATION_FLUSH_MS in one transaction. A follow-up or a GET of the same conversation on this worker
writes what waits first (`flush`), so it always sees its earlier turns; on another worker a turn is seen
within CONVERSATION_FLUSH_MS. What waits is lost if the process dies before the next write: that turn's
follow-up is a 404, which is all it costs. Expired conversations are swept after a write."""

from __future__ import annotations

import asyncio

from provenance.guards.sweep import Sweeper
from provenance.logs import get_logger
from provenance.store.conversations import ConversationRow, ConversationStore, TurnRow

log = get_logger("provenance.conversations")

# Enough for minutes of traffic while the database is away; beyond it the oldest go unkept.
MAX_PENDING = 50_000
CLEANUP_EVERY_S = 600.0


class TurnLog:
    def __init__(self, store: ConversationStore, flush_ms: float) -> None:
        self.store = store
        self.flush_s = flush_ms / 1000
        self._pending: list[tuple[ConversationRow, TurnRow]] = []
        # The batch being written: still waiting, for a reader, until its write commits.
        self._writing: list[tuple[ConversationRow, TurnRow]] = []
        self._task: asyncio.Task[None] | None = None
        self._lock = asyncio.Lock()
        self._sweeper = Sweeper("expired conversations", CLEANUP_EVERY_S, store.cleanup)

    def keep(self, conversation: ConversationRow, turn: TurnRow) -> None:
        """Called once per turn, in the request's task; never waits."""
        self._pending.append((conversation, turn))
        if len(self._pending) > MAX_PENDING:
            del self._pending[: len(self._pending) - MAX_PENDING]
            log.warning("conversation turns not kept: too many waited for the database")
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name="turn-log")

    def waiting(self, conversation_id: str) -> bool:
        """Whether a turn of this conversation is not written yet: `flush` then waits until it is."""
        return any(c.id == conversation_id for c, _ in (*self._pending, *self._writing))

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.flush_s)
            await self.flush()

    async def flush(self) -> int:
        """Write what waits, now; a failed write keeps it for the next. One write at a time, so that a turn
        is never written before the turn it follows."""
        async with self._lock:
            if not self._pending:
                return 0
            batch, self._pending = self._pending, []
            self._writing = batch
            # A conversation's row once per batch, with the latest expiry of its turns.
            latest: dict[str, ConversationRow] = {}
            for conversation, _ in batch:
                seen = latest.get(conversation.id)
                if seen is None or conversation.expires_at > seen.expires_at:
                    latest[conversation.id] = conversation
            try:
                kept = await self.store.keep(list(latest.values()), [t for _, t in batch])
            except BaseException as exc:
                self._pending[:0] = batch
                if not isinstance(exc, Exception):
                    raise
                log.warning("could not keep conversation turns; retrying", error=repr(exc), turns=len(batch))
                return 0
            finally:
                self._writing = []
        await self._sweeper.maybe_run()
        return kept

    async def aclose(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)
        await self.flush()
