"""Who a request comes from, for the routes that read a corpus without the bot check (/corpora, /corpus,
/passages): a Bearer key, checked as /ask checks it, else the page, which sees the public corpora."""

from __future__ import annotations

from provenance.access.clients import Client
from provenance.access.store import AccessStore
from provenance.errors import ServiceError
from provenance.guards.apikeys import bearer_token, check_key

# RFC 6750 §3: a bad bearer key is a failed authentication.
CHALLENGE = {"WWW-Authenticate": 'Bearer error="invalid_token"'}


async def anonymous(store: AccessStore) -> Client:
    return Client(private=await store.private_corpora())


async def identify(store: AccessStore, authorization: str | None) -> Client:
    """The client behind `authorization`; a 401 for an unknown, revoked or empty key, never a quiet
    fall-back to what a client without a key may see."""
    key = bearer_token(authorization)
    if key is None:
        return await anonymous(store)
    checked = await check_key(store, key)
    if checked.client is None:
        raise ServiceError(401, "invalid_api_key", checked.detail, CHALLENGE)
    return checked.client
