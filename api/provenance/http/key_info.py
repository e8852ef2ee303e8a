"""GET /key: the API key sending the request, its role, and the corpora it may add documents to and remove them
from. The page's Documents view lists these; GET /corpora can't, as a corpus made with POST /corpora holds no
passage until its first upload, and GET /corpora lists only corpora that can be asked."""

from __future__ import annotations

from typing import Any

from litestar import Request, get
from litestar.datastructures import State
from litestar.di import NamedDependency
from litestar.openapi import ResponseSpec

from provenance.access.clients import Role, Visibility
from provenance.errors import ErrorEnvelope
from provenance.http.corpus_admin import key_holder
from provenance.services import Services
from provenance.wire import Wire


class EditableCorpus(Wire):
    name: str
    # The title it was created with, else the one its documents give it, else its name.
    title: str
    visibility: Visibility
    passage_count: int


class KeyOut(Wire):
    name: str
    role: Role
    # Only corpora this key may change: an editor's grants, every corpus for an admin, none for a reader.
    editable: list[EditableCorpus]


@get(
    "/key",
    summary="The API key sending the request: its name, role and the corpora it may add documents to",
    responses={
        401: ResponseSpec(
            ErrorEnvelope, description="`api_key_required` or `invalid_api_key`", generate_examples=False
        ),
    },
)
async def key_info(request: Request[Any, Any, State], services: NamedDependency[Services]) -> KeyOut:
    client = await key_holder(services, request)
    found = {c.name: c for c in await services.store.corpora()}
    # Read after the corpora, as GET /corpora does: a corpus is recorded before it holds any passage.
    recorded = await services.access.corpus_access()
    private = client.private | {n for n, a in recorded.items() if a.visibility == "private"}
    editable = []
    for name in sorted(set(found) | set(recorded)):
        # An editor's grant is a grant to read too: writes() alone decides, private or not.
        if not client.writes(name):
            continue
        state = found.get(name)
        title = (recorded[name].title if name in recorded else "") or (state.title if state else "") or name
        editable.append(
            EditableCorpus(
                name=name,
                title=title,
                visibility="private" if name in private else "public",
                passage_count=state.passage_count if state else 0,
            )
        )
    # key_holder answers 401 for a request without a key, so the client here always has a name and a role.
    assert client.key is not None and client.role is not None
    return KeyOut(name=client.key, role=client.role, editable=editable)


KEY_ROUTES = [key_info]
