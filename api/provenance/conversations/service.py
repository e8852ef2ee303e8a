"""Who may read which conversation, and what a turn knows of the turns before it.

A conversation is owned by the client that started it, as POST /feedback tells clients apart: the HMAC of
its API key's name when it sent one, else of its address (IPv6 per /64), under the same key. Another
client's id is answered as an unknown one (404), and so is an expired one: nobody learns that an id exists.
Two browsers behind one NAT share an owner; the id's 192 random bits, not the owner, keep their threads apart.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import hmac
import secrets
from collections.abc import Awaitable, Callable

import msgspec

from provenance.conversations.log import TurnLog
from provenance.conversations.wire import Conversation, ConversationTurn
from provenance.errors import ServiceError
from provenance.guards.ratelimit import rate_limit_key
from provenance.settings import Settings
from provenance.store.conversations import ConversationRow, ConversationStore, StoredConversation, TurnRow
from provenance.wire import AskResponse, Citation

_citations = msgspec.json.Decoder(list[Citation])
_encoder = msgspec.json.Encoder()


class UnknownConversation(ServiceError):
    def __init__(self) -> None:
        super().__init__(
            404,
            "unknown_conversation",
            "no conversation with that id: it was never started, has expired or was deleted, or belongs to another"
            " client; ask without conversationId to start a new one",
        )


class ConversationConflict(ServiceError):
    def __init__(self, code: str, message: str) -> None:
        super().__init__(409, code, message)


class Earlier(msgspec.Struct, frozen=True):
    """An earlier turn, as the next one reads it: an answer only when it was answered."""

    question: str
    standalone_question: str
    status: str
    answer: str | None
    passage_ids: list[str]


class Thread(msgspec.Struct, kw_only=True):
    """This turn's place in its conversation."""

    id: str
    owner_hash: str
    # The corpus the conversation is pinned to; None on a first turn, whose corpus is the request's.
    corpus: str | None
    created_at: dt.datetime
    turn: int
    earlier: list[Earlier] = msgspec.field(default_factory=list)

    @property
    def follow_up(self) -> bool:
        return self.turn > 1

    @property
    def previous(self) -> Earlier | None:
        """The last turn that was worked on (a blocked turn was not): what a follow-up follows."""
        return next((e for e in reversed(self.earlier) if e.status != "blocked"), None)


def new_conversation_id() -> str:
    # 24 bytes: 192 random bits, 32 URL-safe characters (wire.CONVERSATION_ID_PATTERN).
    return secrets.token_urlsafe(24)


class Conversations:
    def __init__(
        self, settings: Settings, store: ConversationStore, secret: Callable[[bytes], Awaitable[bytes]]
    ) -> None:
        self.ttl = dt.timedelta(seconds=settings.conversation.ttl_s)
        self.max_turns = settings.conversation.max_turns
        self.store = store
        self.log = TurnLog(store, settings.conversation.flush_ms)
        self._secret = secret
        self._key: bytes | None = settings.feedback.hmac_key.encode() if settings.feedback.hmac_key else None

    async def owner(self, client_key: str) -> str:
        """The client as the feedback table knows it (FeedbackDesk.client_hash): the same key, the same identity."""
        if self._key is None:
            self._key = await self._secret(secrets.token_bytes(32))
        identity, _ = rate_limit_key(client_key)
        return hmac.new(self._key, identity.encode(), hashlib.sha256).hexdigest()[:32]

    async def _owned(self, conversation_id: str, owner_hash: str) -> StoredConversation:
        if self.log.waiting(conversation_id):
            # This worker's earlier turn is not written yet: written now, so the follow-up sees it.
            await self.log.flush()
        found = await self.store.find(conversation_id)
        # hmac.compare_digest: how long the comparison takes says nothing about whose id it is.
        if found is None or not hmac.compare_digest(found.conversation.owner_hash, owner_hash):
            raise UnknownConversation()
        return found

    async def open(self, conversation_id: str | None, client_key: str, corpus: str | None) -> Thread:
        """This turn's thread: a new conversation without an id, else the caller's own conversation with room
        for another turn, on the corpus it is pinned to (`corpus`, when named, must be that one)."""
        owner_hash = await self.owner(client_key)
        if conversation_id is None:
            return Thread(id=new_conversation_id(), owner_hash=owner_hash, corpus=None, created_at=_now(), turn=1)
        found = await self._owned(conversation_id, owner_hash)
        pinned = found.conversation.corpus
        if corpus is not None and corpus != pinned:
            raise ConversationConflict(
                "conversation_corpus",
                f"this conversation is about the corpus {pinned!r}, not {corpus!r}: ask without corpus, or start a"
                " new conversation",
            )
        if len(found.turns) >= self.max_turns:
            raise ConversationConflict(
                "conversation_full",
                f"this conversation has had its {self.max_turns} turns (CONVERSATION_MAX_TURNS); start a new one",
            )
        earlier = [
            Earlier(t.question, t.standalone_question, t.status, t.answer, list(t.passage_ids)) for t in found.turns
        ]
        last = found.turns[-1].turn if found.turns else 0
        return Thread(
            id=conversation_id,
            owner_hash=owner_hash,
            corpus=pinned,
            created_at=found.conversation.created_at,
            turn=last + 1,
            earlier=earlier,
        )

    def keep(self, thread: Thread, response: AskResponse) -> None:
        """The turn, written off the request path (TurnLog). The answer is kept only when it was answered."""
        now = _now()
        answered = response.status == "answered"
        conversation = ConversationRow(
            id=thread.id,
            owner_hash=thread.owner_hash,
            corpus=thread.corpus or response.corpus or "",
            created_at=thread.created_at,
            expires_at=now + self.ttl,
        )
        turn = TurnRow(
            conversation_id=thread.id,
            turn=thread.turn,
            request_id=response.request_id,
            question=response.question,
            standalone_question=response.standalone_question or response.question,
            status=response.status,
            reason=response.reason,
            answer=response.answer if answered else None,
            citations_json=_encoder.encode(response.citations if answered else []).decode(),
            passage_ids=[c.passage_id for c in response.citations] if answered else [],
            created_at=now,
        )
        self.log.keep(conversation, turn)

    async def read(self, conversation_id: str, client_key: str) -> Conversation:
        found = await self._owned(conversation_id, await self.owner(client_key))
        c = found.conversation
        return Conversation(
            conversation_id=c.id,
            corpus=c.corpus,
            expires_at=c.expires_at.isoformat(),
            turns=[
                ConversationTurn(
                    turn=t.turn,
                    request_id=t.request_id,
                    question=t.question,
                    standalone_question=t.standalone_question,
                    status=t.status,  # type: ignore[arg-type]  # the table's CHECK holds it to Status
                    reason=t.reason,  # type: ignore[arg-type]
                    answer=t.answer,
                    citations=_citations.decode(t.citations_json),
                    asked_at=t.created_at.isoformat(),
                )
                for t in found.turns
            ],
        )

    async def forget(self, conversation_id: str, client_key: str) -> None:
        owner_hash = await self.owner(client_key)
        if self.log.waiting(conversation_id):
            await self.log.flush()
        if not await self.store.forget(conversation_id, owner_hash):
            raise UnknownConversation()


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)
