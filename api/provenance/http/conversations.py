"""GET and DELETE /conversations/{id}: a conversation's turns, and forgetting it. The work is
provenance.conversations.service's; here, who the client is.

The client is who /ask took it to be: the API key's name when the request sends one (a bad key is a 401),
else its address (behind TRUSTED_PROXIES, the forwarded one). Reading needs no bot check: the id's 192
random bits and the owner both have to match, and a mismatch is told as an unknown id (404)."""

from __future__ import annotations

from typing import Any

from litestar import Controller, Request, Response, delete, get, route
from litestar.datastructures import State
from litestar.di import NamedDependency
from litestar.enums import HttpMethod
from litestar.openapi import ResponseSpec
from litestar.params import FromPath, Parameter

from provenance.access.clients import Client
from provenance.access.identify import anonymous
from provenance.conversations.service import Conversations, UnknownConversation
from provenance.conversations.wire import Conversation
from provenance.errors import ErrorEnvelope, ServiceError
from provenance.services import Services
from provenance.wire import CONVERSATION_ID_PATTERN

_ID = Parameter(
    pattern=CONVERSATION_ID_PATTERN,
    min_length=32,
    max_length=32,
    description="the conversationId an /ask response gave",
)


def _spec(description: str) -> ResponseSpec:
    return ResponseSpec(ErrorEnvelope, description=description, generate_examples=False)


_RESPONSES = {
    400: _spec("`bad_request`: not a conversation id"),
    401: _spec("`invalid_api_key`: unknown or revoked API key"),
    404: _spec("`unknown_conversation`: never started, expired, deleted, or another client's"),
    503: _spec("`database_unavailable` or `overloaded`; see Retry-After"),
}


async def _client(request: Request[Any, Any, State], services: Services) -> tuple[Conversations, str, Client]:
    """The conversations, the owner the client is to them, and what it may read: one check of its key,
    which gives both (a key's owner is its name, as /ask takes it; without a key, its address)."""
    conversations = services.pipeline.conversations
    if conversations is None:
        raise UnknownConversation()
    guards = services.pipeline.guards
    headers = {k.lower(): v for k, v in request.headers.items()}
    client_ip = guards.client_ip(request.client.host if request.client else None, headers)
    authorization = headers.get("authorization")
    if authorization is None:
        return conversations, client_ip, await anonymous(services.access)
    bot = await guards.bot_check(None, authorization, client_ip)
    if bot.unauthorized or bot.client is None:
        raise ServiceError(
            401,
            "invalid_api_key",
            bot.stage.detail or "unknown or revoked API key",
            {"WWW-Authenticate": 'Bearer error="invalid_token"'},
        )
    return conversations, bot.client_key or client_ip, bot.client


class ConversationRoutes(Controller):
    """Both methods on one resource, with an OPTIONS of its own: Litestar's own names only the method whose
    handler made the route (litestar 2.25, routes/http.py `create_options_handler`)."""

    path = "/conversations/{conversation_id:str}"

    @route(http_method=[HttpMethod.OPTIONS], include_in_schema=False, status_code=204)
    async def conversation_options(self) -> Response[None]:
        return Response(None, status_code=204, headers={"Allow": "DELETE, GET, OPTIONS"})

    @get(
        summary="A conversation's turns: each question, standalone question, status, answer and citations",
        description="Only the client that started it can read it (its API key, else its address). A refused or"
        " blocked turn has no answer text.",
        responses=_RESPONSES,
    )
    async def read_conversation(
        self,
        request: Request[Any, Any, State],
        services: NamedDependency[Services],
        conversation_id: FromPath[str] = _ID,
    ) -> Conversation:
        conversations, owner, reader = await _client(request, services)
        conversation = await conversations.read(conversation_id, owner)
        # A conversation is of its corpus: one this client may no longer read (a grant taken away, the corpus
        # made private) is hidden with it, told as an unknown id like any other it may not see.
        if not reader.reads(conversation.corpus):
            raise UnknownConversation()
        return conversation

    @delete(summary="Forget a conversation and its turns", status_code=204, responses=_RESPONSES)
    async def forget_conversation(
        self,
        request: Request[Any, Any, State],
        services: NamedDependency[Services],
        conversation_id: FromPath[str] = _ID,
    ) -> None:
        conversations, owner, _ = await _client(request, services)
        await conversations.forget(conversation_id, owner)


CONVERSATION_ROUTES = [ConversationRoutes]
