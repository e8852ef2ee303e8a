"""Documents through the API (Bearer keys only): GET and POST /corpora/{name}/documents, DELETE
/corpora/{name}/documents/{id}, and GET /jobs/{id} (and its events, as SSE).
An upload is refused at once only for the request's own limits (413); everything about a file's content is
that file's outcome in its job (provenance.jobs.worker)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Annotated, Any

import msgspec
from litestar import Request, Response, delete, get, post, route
from litestar.datastructures import State, UploadFile
from litestar.di import NamedDependency
from litestar.openapi import ResponseSpec
from litestar.openapi.spec import OpenAPI, OpenAPIMediaType, OpenAPIType, Schema
from litestar.params import Parameter
from litestar.response import ServerSentEvent
from litestar.response.sse import ServerSentEventMessage

from provenance.access.clients import Client, require_read, require_write
from provenance.errors import ErrorEnvelope, ServiceError
from provenance.guards.ratelimit import spend_hourly
from provenance.http.corpus_admin import CorpusPath, key_holder
from provenance.jobs.queue import Job, JobStore
from provenance.jobs.worker import kept_name
from provenance.services import Services
from provenance.store.sources import SourceStore
from provenance.wire import Wire


class DocumentOut(Wire):
    id: str
    file_name: str
    format: str
    bytes: int
    sha256: str
    added_at: str
    # Its passages now served, and its pages (PDF; None for other formats).
    passages: int = 0
    pages: int | None = None
    status: str = "added"


class Documents(Wire):
    documents: list[DocumentOut]


class JobAccepted(Wire):
    job_id: str


class JobOut(Wire):
    id: str
    corpus: str
    kind: str
    state: str
    progress: dict[str, Any]
    documents: list[dict[str, Any]]
    created_at: str
    error: str | None = None
    finished_at: str | None = None


# A document's id as the worker makes it (12 hex digits of a uuid4, or of a folder file's hash).
DocumentIdPath = Annotated[
    str, Parameter(pattern=r"^[0-9a-f]{12}$", min_length=12, max_length=12, description="a document's id")
]
# A job's id as JobStore makes it (uuid4's hex): anything else is a 400 before any key is checked.
JobIdPath = Annotated[str, Parameter(pattern=r"^[0-9a-f]{32}$", max_length=32, description="a job's id")]


def _spec(description: str) -> ResponseSpec:
    return ResponseSpec(ErrorEnvelope, description=description, generate_examples=False)


async def _existing(services: Services) -> set[str]:
    recorded = await services.access.corpus_access()
    return {c.name for c in await services.store.corpora()} | set(recorded)


@get(
    "/corpora/{name:str}/documents",
    summary="The documents uploaded to a corpus",
    responses={
        401: _spec("`api_key_required` or `invalid_api_key`"),
        404: _spec("`unknown_corpus`: no such corpus, or none this key may read"),
    },
)
async def list_documents(
    request: Request[Any, Any, State], name: CorpusPath, services: NamedDependency[Services]
) -> Documents:
    client = await key_holder(services, request)
    require_read(client, name, await _existing(services))
    sources = SourceStore(services.pool)
    docs = await sources.documents(name)
    counts = await sources.passage_counts(name)
    return Documents(
        documents=[
            DocumentOut(
                id=d.id,
                file_name=d.file_name,
                format=d.format,
                bytes=d.bytes,
                sha256=d.sha256,
                added_at=d.added_at.isoformat() if d.added_at else "",
                passages=counts.get(d.path, (0, None))[0],
                pages=counts.get(d.path, (0, None))[1],
            )
            for d in docs
        ]
    )


@post(
    "/corpora/{name:str}/documents",
    summary="Upload documents (multipart, the repeatable field `files`): 202 with the job that ingests them",
    status_code=202,
    request_max_body_size=None,
    responses={
        400: _spec("`bad_request`: no files in the field `files`"),
        401: _spec("`api_key_required` or `invalid_api_key`"),
        403: _spec("`forbidden`: the key may read the corpus but not add to it"),
        404: _spec("`unknown_corpus`: no such corpus, or none this key may read"),
        413: _spec("more files than UPLOAD_MAX_FILES, or a request over UPLOAD_MAX_REQUEST_BYTES"),
        429: _spec("`rate_limited`: the key's uploads this hour are used up (UPLOAD_RATE_PER_HOUR); see Retry-After"),
    },
)
async def upload_documents(
    request: Request[Any, Any, State], name: CorpusPath, services: NamedDependency[Services]
) -> JobAccepted:
    client = await key_holder(services, request)
    require_write(client, name, await _existing(services))
    limits = services.settings.ingest
    declared = int(request.headers.get("content-length") or 0)
    if declared > limits.upload_max_request_bytes:
        raise _too_large(f"the request is {declared:,} bytes; the limit is {limits.upload_max_request_bytes:,}")
    # An upload is counted against its key's own hourly limit, apart from its questions'.
    await spend_hourly(
        services.store,
        f"upload:{client.key or ''}",
        services.settings.ingest.upload_rate_per_hour,
        "upload",
        "UPLOAD_RATE_PER_HOUR",
    )
    form = await request.form()
    uploads = [f for f in form.getall("files") if isinstance(f, UploadFile)] if "files" in form else []
    if not uploads:
        raise ServiceError(400, "bad_request", "send the documents as multipart/form-data in the field `files`")
    if len(uploads) > limits.upload_max_files:
        raise _too_large(f"{len(uploads)} files; the limit is {limits.upload_max_files} (UPLOAD_MAX_FILES)")
    files: list[tuple[str, bytes]] = []
    total = 0
    for upload in uploads:
        data = await upload.read()
        total += len(data)
        if total > limits.upload_max_request_bytes:
            raise _too_large(f"the files pass {limits.upload_max_request_bytes:,} bytes (UPLOAD_MAX_REQUEST_BYTES)")
        # A file name is metadata, never a path here (provenance.jobs.worker.safe_name).
        files.append((kept_name(upload.filename or ""), data))
    job = await JobStore(services.pool).enqueue_upload(name, files, client.key)
    wake_workers(request)
    return JobAccepted(job_id=job.id)


def wake_workers(request: Request[Any, Any, State]) -> None:
    """This process's ingest workers (INGEST_WORKERS) take the job now, not at their next poll."""
    for worker in getattr(request.app.state, "ingest_workers", ()):
        worker.wake()


@delete(
    "/corpora/{name:str}/documents/{document_id:str}",
    summary="Remove a document: 202 with the job that removes it and switches the corpus without it",
    status_code=202,
    responses={
        401: _spec("`api_key_required` or `invalid_api_key`"),
        403: _spec("`forbidden`: the key may read the corpus but not remove from it"),
        404: _spec("`unknown_corpus` (no such corpus, or none this key may read) or `unknown_document`"),
    },
)
async def remove_document(
    request: Request[Any, Any, State],
    name: CorpusPath,
    document_id: DocumentIdPath,
    services: NamedDependency[Services],
) -> JobAccepted:
    client = await key_holder(services, request)
    require_write(client, name, await _existing(services))
    if await SourceStore(services.pool).document(name, document_id) is None:
        raise ServiceError(404, "unknown_document", f"corpus {name!r} has no document {document_id!r}")
    job = await JobStore(services.pool).enqueue(name, "remove", {"documents": [document_id]}, client.key)
    wake_workers(request)
    return JobAccepted(job_id=job.id)


def _too_large(message: str) -> ServiceError:
    return ServiceError(413, "request_too_large", message)


@get(
    "/jobs/{job_id:str}",
    summary="An ingest job: its state, progress and each document's outcome",
    responses={
        401: _spec("`api_key_required` or `invalid_api_key`"),
        404: _spec("`unknown_job`: no such job, or one of a corpus this key may not read"),
    },
)
async def job_status(
    request: Request[Any, Any, State], job_id: JobIdPath, services: NamedDependency[Services]
) -> JobOut:
    return _job_out(await _visible_job(services, request, job_id))


# How often GET /jobs/{id}/events looks at the job: its worker writes progress at most once a second.
EVENTS_POLL_S = 0.5


@get(
    "/jobs/{job_id:str}/events",
    summary="An ingest job as Server-Sent Events: `job` (what GET /jobs/{id} answers) each time it changes, "
    "until it is done or failed",
    media_type="text/event-stream",
    responses={
        401: _spec("`api_key_required` or `invalid_api_key`"),
        404: _spec("`unknown_job`: no such job, or one of a corpus this key may not read"),
    },
)
async def job_events(
    request: Request[Any, Any, State], job_id: JobIdPath, services: NamedDependency[Services]
) -> ServerSentEvent:
    # The key and the job are checked before the stream begins, so a refusal is a plain JSON 4xx.
    first = await _visible_job(services, request, job_id)
    jobs = JobStore(services.pool)

    async def events() -> AsyncIterator[ServerSentEventMessage]:
        job: Job | None = first
        sent = b""
        seq = 0
        while job is not None:
            body = msgspec.json.encode(_job_out(job))
            if body != sent:
                seq, sent = seq + 1, body
                yield ServerSentEventMessage(data=body.decode(), event="job", id=seq)
            if job.state in ("done", "failed"):
                return
            await asyncio.sleep(EVENTS_POLL_S)
            job = await jobs.get(job_id)

    return ServerSentEvent(events())


def declare_job_events(openapi: OpenAPI) -> None:
    """GET /jobs/{id}/events's stream, said in the OpenAPI document (the framework writes an empty schema)."""
    operation = (openapi.paths or {})["/jobs/{job_id}/events"].get
    assert operation is not None and operation.responses is not None
    ok = operation.responses["200"]
    assert not isinstance(ok, dict) and hasattr(ok, "content")
    ok.description = "the job's events until it is done or failed"
    ok.content = {
        "text/event-stream": OpenAPIMediaType(
            schema=Schema(
                type=OpenAPIType.STRING,
                description="Server-Sent Events: `job`, whose data is what GET /jobs/{id} answers, sent at once "
                "and again each time the job changes; the stream ends after the one saying `done` or `failed`.",
            )
        )
    }


async def _visible_job(services: Services, request: Request[Any, Any, State], job_id: str) -> Job:
    client = await key_holder(services, request)
    job = await JobStore(services.pool).get(job_id)
    if job is None or not _may_see(client, job):
        raise ServiceError(404, "unknown_job", f"there is no ingest job {job_id!r}")
    return job


def _job_out(job: Job) -> JobOut:
    return JobOut(
        id=job.id,
        corpus=job.corpus,
        kind=job.kind,
        state=job.state,
        progress=job.progress,
        documents=job.documents,
        error=job.error,
        created_at=job.created_at.isoformat(),
        finished_at=job.finished_at.isoformat() if job.finished_at else None,
    )


def _may_see(client: Client, job: Job) -> bool:
    return client.reads(job.corpus)


@route("/corpora/{name:str}/documents", http_method="OPTIONS", include_in_schema=False)
async def documents_options(name: CorpusPath) -> Response[None]:
    """The path's methods, said by itself for the reason `corpus_admin.corpora_options` gives."""
    return Response(None, status_code=204, headers={"Allow": "GET, OPTIONS, POST"})


# documents_options before the two handlers of its path (see corpus_admin.corpora_options).
DOCUMENT_ROUTES = [documents_options, list_documents, upload_documents, remove_document, job_status, job_events]
