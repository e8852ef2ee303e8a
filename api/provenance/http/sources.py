"""POST /corpora/{name}/sources: a site added to a corpus over the API (issue 46), as `provenance sources add`
does, and its first sync queued. An admin key may name a corpus that doesn't exist yet: it is made public, as
the command makes it. An editor adds to the corpora it is granted; a reader gets 403, and a key that may not
read the corpus its 404, in the words of a corpus that doesn't exist."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from litestar import Request, post
from litestar.datastructures import State
from litestar.di import NamedDependency
from litestar.openapi import ResponseSpec
from litestar.openapi.spec import OpenAPI
from litestar.params import JSONBody

from provenance.access.clients import require_write
from provenance.errors import ErrorEnvelope, ServiceError
from provenance.http.corpus_admin import CorpusPath, key_holder
from provenance.http.documents import wake_workers
from provenance.jobs.queue import JobStore
from provenance.services import Services
from provenance.sources.options import BadSiteOption, site_options, site_url
from provenance.store.sources import SourceStore
from provenance.wire import Wire

# A URL's longest practical length (browsers and servers refuse far shorter ones than this in practice).
Address = Annotated[str, msgspec.Meta(max_length=2048)]


class NewSite(Wire, forbid_unknown_fields=True):
    url: Address
    sitemap: Address | None = None
    prefix: Address | None = None
    max_pages: int | None = None
    every: Annotated[str, msgspec.Meta(max_length=16)] | None = None  # "24h": synced on this schedule
    insecure: bool = False


class SiteAdded(Wire):
    source_id: str
    corpus: str
    url: str
    options: dict[str, Any]
    job_id: str  # its first sync


def _spec(description: str) -> ResponseSpec:
    return ResponseSpec(ErrorEnvelope, description=description, generate_examples=False)


@post(
    "/corpora/{name:str}/sources",
    summary="Add a site to a corpus (admin or editor key): 202 with the job of its first sync",
    status_code=202,
    responses={
        400: _spec("`bad_request`: not an http(s) URL, a bad prefix, page limit or schedule, unknown fields"),
        401: _spec("`api_key_required` or `invalid_api_key`"),
        403: _spec("`forbidden`: the key may read the corpus but not change it"),
        404: _spec("`unknown_corpus`: no such corpus, or none this key may read"),
        409: _spec("`folder_corpus`: the corpus holds a folder's documents (`provenance ingest`)"),
    },
)
async def add_site_source(
    request: Request[Any, Any, State], name: CorpusPath, data: JSONBody[NewSite], services: NamedDependency[Services]
) -> SiteAdded:
    client = await key_holder(services, request)
    existing = {c.name for c in await services.store.corpora()} | set(await services.access.corpus_access())
    if name not in existing and client.admin:
        await services.access.create_corpus(name, "public", "", exists=False)
    else:
        require_write(client, name, existing)
    state = await services.store.corpus_state(name)
    if state is not None and not await SourceStore(services.pool).documents(name):
        raise ServiceError(
            409, "folder_corpus", f"corpus {name!r} holds the documents of a folder (`provenance ingest`); a sync"
            " rebuilds a corpus from its documents, so add the site to a corpus of its own"
        )  # fmt: skip
    try:
        url = site_url(data.url)
        options = site_options(data.sitemap, data.prefix, data.max_pages, data.every, data.insecure)
    except BadSiteOption as exc:
        raise ServiceError(400, "bad_request", str(exc)) from None
    source = await SourceStore(services.pool).add_source(name, "site", url, options)
    job = await JobStore(services.pool).enqueue(name, "sync", {"source": source.id}, client.key)
    wake_workers(request)
    return SiteAdded(source_id=source.id, corpus=name, url=url, options=options, job_id=job.id)


SOURCE_ROUTES = [add_site_source]


def declare_source_constraints(openapi: OpenAPI) -> None:
    """No fields but the declared ones (NewSite forbids the rest): fuzzers then send only what is taken."""
    schema = (openapi.components.schemas or {}).get(NewSite.__name__)
    if schema is not None:
        schema.additional_properties = False
