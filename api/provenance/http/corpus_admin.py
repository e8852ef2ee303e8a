"""POST /corpora and DELETE /corpora/{name}: an admin key creates and removes corpora. Bearer keys only: the
page's bot check never reaches here."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Request, Response, delete, post, route
from litestar.datastructures import State
from litestar.di import NamedDependency
from litestar.openapi import ResponseSpec
from litestar.openapi.spec import OpenAPI
from litestar.params import JSONBody, Parameter

from provenance.access.clients import Client, require_admin, require_read
from provenance.access.identify import CHALLENGE, identify
from provenance.access.wire import CreatedCorpus, NewCorpus, RemovedCorpusOut
from provenance.errors import ErrorEnvelope, ServiceError
from provenance.guards.apikeys import bearer_token
from provenance.services import Services
from provenance.wire import CORPUS_NAME_MAX_CHARS, CORPUS_NAME_PATTERN, DEFAULT_CORPUS

# A corpus named in the path (/corpora/{name}/...): bounded like the query's, so a name no corpus can have is a
# 400 before any key is checked.
CorpusPath = Annotated[
    str, Parameter(pattern=CORPUS_NAME_PATTERN, max_length=CORPUS_NAME_MAX_CHARS, description="a corpus's name")
]


def _spec(description: str) -> ResponseSpec:
    return ResponseSpec(ErrorEnvelope, description=description, generate_examples=False)


async def key_holder(services: Services, request: Request[Any, Any, Any]) -> Client:
    """The client behind a Bearer key; 401 without one: what changes a corpus is never done for the page."""
    authorization = request.headers.get("authorization")
    if bearer_token(authorization) is None:
        raise ServiceError(401, "api_key_required", "send an API key: Authorization: Bearer <key>", CHALLENGE)
    return await identify(services.access, authorization)


async def _require_json(request: Request[Any, Any, Any]) -> None:
    content_type = request.headers.get("content-type", "")
    if content_type.split(";")[0].strip().lower() != "application/json":
        raise ServiceError(415, "unsupported_media_type", "send the corpus as application/json")


@post(
    "/corpora",
    summary="Create a corpus (admin key): public, or private to the keys granted it",
    before_request=_require_json,
    status_code=201,
    responses={
        400: _spec("`bad_request`: a malformed name or title, unknown fields"),
        401: _spec("`api_key_required` or `invalid_api_key`"),
        403: _spec("`forbidden`: the key is not an admin"),
        409: _spec("`corpus_exists`: a corpus of that name exists already"),
        415: _spec("not application/json"),
        503: _spec("`database_unavailable` or `overloaded`; see Retry-After"),
    },
)
async def create_corpus(
    request: Request[Any, Any, State], data: JSONBody[NewCorpus], services: NamedDependency[Services]
) -> CreatedCorpus:
    client = await key_holder(services, request)
    require_admin(client)
    exists = await services.store.corpus_state(data.name) is not None
    title = data.title or ""
    if not await services.access.create_corpus(data.name, data.visibility, title, exists=exists):
        raise ServiceError(409, "corpus_exists", f"corpus {data.name!r} exists already")
    return CreatedCorpus(name=data.name, visibility=data.visibility, title=title)


@delete(
    "/corpora/{name:str}",
    summary="Remove a corpus whole (admin key): its documents, passages, cached answers and grants",
    status_code=200,
    responses={
        401: _spec("`api_key_required` or `invalid_api_key`"),
        403: _spec("`forbidden`: the key may read the corpus but is not an admin"),
        404: _spec("`unknown_corpus`: no such corpus, or none this key may read"),
        409: _spec("`corpus_protected`: the default corpus is removed only from the command line"),
        503: _spec("`database_unavailable` or `overloaded`; see Retry-After"),
    },
)
async def remove_corpus(
    request: Request[Any, Any, State], name: CorpusPath, services: NamedDependency[Services]
) -> RemovedCorpusOut:
    client = await key_holder(services, request)
    recorded = await services.access.corpus_access()
    existing = {c.name for c in await services.store.corpora()} | set(recorded)
    # Only one who may see it learns that they may not remove it.
    require_read(client, name, existing)
    require_admin(client)
    if name == DEFAULT_CORPUS:
        raise ServiceError(
            409,
            "corpus_protected",
            f"{DEFAULT_CORPUS!r} is what `provenance serve --ingest` serves; remove it with "
            "`provenance corpora remove default --force`",
        )
    removed = await services.store.remove_corpus(name)
    await services.access.forget_corpus(name)
    await services.pipeline.corpora.refresh()
    return RemovedCorpusOut(
        name=name,
        passages=removed.passages if removed else 0,
        sentences=removed.sentences if removed else 0,
        cached_answers=removed.cached_answers if removed else 0,
    )


def declare_corpus_admin_constraints(openapi: OpenAPI) -> None:
    """No fields but the declared ones (NewCorpus forbids the rest): fuzzers then send only what is taken."""
    schema = (openapi.components.schemas or {}).get(NewCorpus.__name__)
    if schema is not None:
        schema.additional_properties = False


@route("/corpora", http_method="OPTIONS", include_in_schema=False)
async def corpora_options() -> Response[None]:
    """/corpora's methods. Litestar answers OPTIONS for a path with the methods of the handlers registered
    before its first OPTIONS answer was made (GET /corpora alone), so a path served by two handlers says so
    itself; registered before either."""
    return Response(None, status_code=204, headers={"Allow": "GET, OPTIONS, POST"})


# corpora_options first: see its docstring.
CORPUS_ADMIN_ROUTES = [corpora_options, create_corpus, remove_corpus]
