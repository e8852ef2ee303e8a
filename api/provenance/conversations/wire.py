"""What GET /conversations/{id} returns: the turns as they were answered, refused or blocked."""

from __future__ import annotations

from provenance.wire import Citation, Reason, Status, Wire


class ConversationTurn(Wire):
    turn: int
    request_id: str
    question: str
    # What was searched for and judged against: the question itself on the first turn.
    standalone_question: str
    status: Status
    reason: Reason | None
    # Only an answered turn keeps its answer; a refused answer's text never left the server.
    answer: str | None
    citations: list[Citation]
    asked_at: str


class Conversation(Wire):
    conversation_id: str
    corpus: str
    turns: list[ConversationTurn]
    # Past this instant the conversation is forgotten (CONVERSATION_TTL_S after its last turn).
    expires_at: str
