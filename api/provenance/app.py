"""The Litestar app factory: routes, error envelope, request ids, lifespan of pool and models."""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import asyncpg
import structlog
from litestar import Litestar, Request, Response, get, post
from litestar.config.cors import CORSConfig
from litestar.datastructures import State
from litestar.enums import ScopeType
from litestar.exceptions import HTTPException, NotFoundException, ValidationException
from litestar.openapi import OpenAPIConfig, ResponseSpec
from litestar.openapi.spec import OpenAPI, Schema
from litestar.params import FromPath, JSONBody
from litestar.static_files import create_static_files_router
from litestar.types import ASGIApp, Message, Receive, ReceiveMessage, Scope, Send

from provenance import __version__, http_errors
from provenance.corpora import default_of
from provenance.errors import (
    BadRequest,
    DatabaseUnavailable,
    ErrorBody,
    ErrorEnvelope,
    NotFound,
    Overloaded,
    ServiceError,
    UnknownCorpus,
)
from provenance.logs import configure_logging, get_logger
from provenance.models import (
    QUESTION_PATTERN,
    AskRequest,
    AskResponse,
    Corpora,
    CorpusExample,
    CorpusFile,
    CorpusInfo,
    CorpusSummary,
    Health,
    PassageOut,
    PublicConfig,
)
from provenance.services import Services, build_services
from provenance.settings import REPO_ROOT, Settings, load_settings

log = get_logger("provenance.http")
WEB_DIR = REPO_ROOT / "web"

_DB_ERRORS = (
    OSError,
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,
    # Shutting down, starting up, or cancelled by an operator: the database, not the request, is at fault.
    asyncpg.exceptions.OperatorInterventionError,
    asyncpg.exceptions.TooManyConnectionsError,
    asyncio.TimeoutError,
)

# The page's policy: its own scripts and styles only, plus Turnstile's script and frame.
CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self' https://challenges.cloudflare.com; "
    "frame-src https://challenges.cloudflare.com; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"strict-origin-when-cross-origin"),
    (b"permissions-policy", b"camera=(), microphone=(), geolocation=(), payment=(), usb=(), interest-cohort=()"),
    (b"cross-origin-opener-policy", b"same-origin"),
)


def _error(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> Response[Any]:
    return Response(ErrorEnvelope(ErrorBody(code=code, message=message)), status_code=status, headers=headers or {})


_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    413: "payload_too_large",
    408: "request_timeout",
    415: "unsupported_media_type",
    429: "rate_limited",
}


def _handle_http(request: Request[Any, Any, Any], exc: HTTPException) -> Response[Any]:
    message = exc.detail
    if isinstance(exc, ValidationException) and isinstance(exc.extra, list) and exc.extra:
        first = exc.extra[0]
        if isinstance(first, dict):
            message = http_errors.validation_message(str(first.get("message", message)), first.get("key"))
    elif exc.status_code == 404:
        message = http_errors.not_found_message(request.url.path)
    elif exc.status_code == 405:
        allow = (exc.headers or {}).get("allow") or (exc.headers or {}).get("Allow")
        message = http_errors.method_message(request.method, request.url.path, allow)
    elif exc.status_code == 413:
        limit = request.app.request_max_body_size
        message = http_errors.too_large_message(limit if isinstance(limit, int) else None)
    if exc.status_code == 400 and http_errors.is_not_json(str(exc.detail)):
        message = "the request body is not valid JSON"
    return _error(exc.status_code, _HTTP_CODES.get(exc.status_code, "http_error"), message, exc.headers)


def _handle_service(request: Request[Any, Any, Any], exc: ServiceError) -> Response[Any]:
    return _error(exc.status, exc.code, exc.message, exc.headers)


def _handle_any(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    if isinstance(exc, _DB_ERRORS):
        log.warning("database unavailable", error=repr(exc))
        db = DatabaseUnavailable()
        return _error(db.status, db.code, db.message, db.headers)
    log.exception("unhandled error", path=request.url.path)
    return _error(500, "internal_error", "something went wrong on our side; the error was logged")


def request_middleware(read_timeout_s: float) -> Any:
    """One middleware, as one layer costs about 20 µs a request on the cached path, for two jobs:

    - the request id: every request gets one (or keeps a sane incoming X-Request-ID), bound to its log
      lines and echoed back;
    - the body deadline: a request body must arrive within `read_timeout_s` of the headers, so a client
      trickling its body (slowloris) is cut off with a 408 and its connection closed, instead of holding
      a connection and a task forever. Once the body is complete, `receive` is left alone. (Headers are
      bounded before the app is called: api/provenance/serving.py.)
    """

    def middleware(app: ASGIApp) -> ASGIApp:
        async def handle(scope: Scope, receive: Receive, send: Send) -> None:
            if scope["type"] != ScopeType.HTTP:
                await app(scope, receive, send)
                return
            incoming = ""
            for name, value in scope["headers"]:
                if name == b"x-request-id":
                    incoming = value.decode("latin-1")
                    break
            request_id = incoming if 8 <= len(incoming) <= 64 and incoming.replace("-", "").isalnum() else ""
            request_id = request_id or uuid.uuid4().hex
            scope.setdefault("state", {})["request_id"] = request_id
            structlog.contextvars.clear_contextvars()
            structlog.contextvars.bind_contextvars(request_id=request_id)
            started = time.perf_counter()
            status = 0
            # asyncio.timeout_at, not wait_for: no task per receive, one timer handle.
            deadline = asyncio.get_running_loop().time() + read_timeout_s
            body_done = False

            async def bounded_receive() -> ReceiveMessage:
                nonlocal body_done
                if body_done:
                    return await receive()
                try:
                    async with asyncio.timeout_at(deadline):
                        message = await receive()
                except TimeoutError:
                    log.warning("request body too slow", path=scope.get("path"), timeout_s=read_timeout_s)
                    # Connection: close makes the server drop the socket once the 408 is sent.
                    raise HTTPException(
                        status_code=408,
                        detail=f"the request body did not arrive within {read_timeout_s:g}s",
                        headers={"Connection": "close"},
                    ) from None
                if message["type"] != "http.request" or not message.get("more_body", False):
                    body_done = True
                return message

            async def send_with_id(message: Message) -> None:
                nonlocal status
                if message["type"] == "http.response.start":
                    status = message["status"]
                    message["headers"] = [*message.get("headers", []), (b"x-request-id", request_id.encode())]
                await send(message)

            try:
                await app(scope, bounded_receive, send_with_id)
            finally:
                log.info(
                    "request",
                    method=scope.get("method"),
                    path=scope.get("path"),
                    status=status,
                    ms=round((time.perf_counter() - started) * 1000, 2),
                )
                structlog.contextvars.clear_contextvars()

        return handle

    return middleware


async def security_headers(message: Message, scope: Scope) -> None:
    """A `before_send` hook, so every response gets these, the router's own 404s and 405s included.

    The schema viewers under /schema load their scripts from a CDN, so they go without the CSP; the
    page, the API and the OpenAPI document itself carry it.
    """
    if message["type"] != "http.response.start":
        return
    headers = list(message.get("headers", []))
    present = {name.lower() for name, _ in headers}
    extra = list(SECURITY_HEADERS)
    path = str(scope.get("path", ""))
    if not path.startswith("/schema") or path.endswith((".json", ".yaml", ".yml")):
        extra.append((b"content-security-policy", CONTENT_SECURITY_POLICY.encode()))
    headers.extend((name, value) for name, value in extra if name not in present)
    message["headers"] = headers


_ERROR = "an error, as {error: {code, message}}"
_DB_DOWN = ResponseSpec(ErrorEnvelope, description="the database is unavailable", generate_examples=False)
_UNAVAILABLE = ResponseSpec(
    ErrorEnvelope,
    description="`overloaded` (more questions than can start within ASK_QUEUE_TIMEOUT_S) or"
    " `database_unavailable`; see Retry-After",
    generate_examples=False,
)
_QUESTION = re.compile(QUESTION_PATTERN)


def _errors(*statuses: int) -> dict[int, ResponseSpec]:
    return {s: ResponseSpec(ErrorEnvelope, description=_ERROR, generate_examples=False) for s in statuses}


def _services(state: State) -> Services:
    services: Services = state.services
    return services


@get(
    "/healthz",
    summary="Liveness and readiness: database, passage count, profile, version",
    responses={503: ResponseSpec(Health, description="the database is down", generate_examples=False)},
)
async def healthz(state: State) -> Response[Health]:
    s = _services(state)
    busy = False
    # Twice the pool's own wait, so that a busy pool answers with its verdict (Overloaded) before this gives up.
    limit_s = 2 * s.settings.database.timeout_s
    try:
        count = await asyncio.wait_for(s.store.ping(), timeout=limit_s)
        corpus = await asyncio.wait_for(s.store.corpus_state(), timeout=limit_s)
        db_up = True
    except Overloaded:
        # Every pooled connection is in use: the database is answering, this server is busy.
        count, corpus, db_up, busy = None, None, True, True
    except Exception:
        count, corpus, db_up = None, None, False
    body = Health(
        status="ok" if db_up and not busy else "degraded",
        database="up" if db_up else "down",
        passages=count,
        profile=s.settings.profile,
        version=__version__,
        embed_model=s.settings.embedding.model,
        corpus_version=corpus.version if corpus else None,
    )
    return Response(body, status_code=200 if db_up else 503)


def _examples(raw: list[dict[str, Any]]) -> list[CorpusExample]:
    return [CorpusExample(question=e["question"], covered=e.get("covered", True)) for e in raw]


@get(
    "/corpora",
    summary="The corpora /ask can answer from, each with its title, description and example questions",
    responses={503: _DB_DOWN},
)
async def corpora(state: State) -> Corpora:
    s = _services(state)
    found = await s.store.corpora()
    return Corpora(
        default=default_of([c.name for c in found]) if found else None,
        corpora=[
            CorpusSummary(
                name=c.name,
                title=c.title or c.name,
                description=c.description,
                examples=_examples(c.examples),
                passage_count=c.passage_count,
                version=c.version,
            )
            for c in found
        ],
    )


@get(
    "/corpus",
    summary="One corpus in full (the default one without `name`): files, passage count, version, model",
    responses={**_errors(404), 503: _DB_DOWN},
)
async def corpus(state: State, name: str | None = None) -> CorpusInfo:
    s = _services(state)
    wanted = name if name is not None else s.pipeline.default_corpus
    st = await s.store.corpus_state(wanted)
    if st is None:
        if name is not None:
            raise UnknownCorpus(name, sorted(c.name for c in await s.store.corpora()))
        return CorpusInfo(version=None, model=None, passage_count=0, files=[])
    return CorpusInfo(
        version=st.version,
        model=st.embedding_model,
        passage_count=st.passage_count,
        files=[CorpusFile(source=f["source"], passages=f["passages"], tokens=f["tokens"]) for f in st.files],
        ingested_at=st.ingested_at.isoformat(),
        name=st.name,
        title=st.title or st.name,
        description=st.description,
        examples=_examples(st.examples),
    )


@get(
    "/passages/{passage_id:path}",
    summary="One passage, for the evidence view",
    responses={**_errors(404), 503: _DB_DOWN},
)
async def passage(state: State, passage_id: FromPath[str], corpus: str | None = None) -> PassageOut:
    s = _services(state)
    in_corpus = corpus if corpus is not None else s.pipeline.default_corpus
    # Postgres text can't hold NUL, so no passage id has one: answer here rather than fail in the driver.
    found = None if "\x00" in passage_id + in_corpus else await s.store.passage(passage_id.lstrip("/"), in_corpus)
    if found is None:
        raise NotFound(f"no passage with id {passage_id.lstrip('/')!r}")
    return found


@get("/config", summary="What the page needs to know: profile, Turnstile site key, question length")
async def public_config(state: State) -> PublicConfig:
    # No database read: the page can say how to ask while the database is down. Its corpora and their
    # examples come from /corpora.
    s = _services(state)
    return PublicConfig(
        profile=s.settings.profile,
        turnstile_site_key=s.settings.guards.turnstile_site_key,
        max_question_chars=s.settings.server.max_question_chars,
    )


async def _require_json(request: Request[Any, Any, Any]) -> None:
    content_type = request.headers.get("content-type", "")
    if content_type.split(";")[0].strip().lower() != "application/json":
        raise ServiceError(415, "unsupported_media_type", "send the question as application/json")


@post(
    "/ask",
    summary="Answer a question from the documents, or refuse with the evidence shown",
    before_request=_require_json,
    status_code=200,
    responses={
        **_errors(400, 404, 408, 409, 413, 415),
        401: ResponseSpec(
            AskResponse, description="blocked (invalid_api_key): unknown or revoked API key", generate_examples=False
        ),
        429: ResponseSpec(AskResponse, description="rate limited; see Retry-After", generate_examples=False),
        503: _UNAVAILABLE,
    },
)
async def ask(request: Request[Any, Any, State], data: JSONBody[AskRequest], state: State) -> Response[AskResponse]:
    s = _services(state)
    # Exactly the constraints the OpenAPI document declares (see declare_request_constraints).
    if len(data.question) > s.settings.server.max_question_chars:
        raise BadRequest(
            f"question is {len(data.question)} characters; the limit is {s.settings.server.max_question_chars}",
            code="invalid_question",
        )
    if _QUESTION.search(data.question) is None:
        if "\x00" in data.question:
            raise BadRequest("question must not contain NUL characters", code="invalid_question")
        raise BadRequest("question must not be empty", code="invalid_question")
    question = data.question.strip()
    request_id: str = request.scope.get("state", {}).get("request_id") or uuid.uuid4().hex
    outcome = await s.pipeline.ask(
        question,
        request_id=request_id,
        turnstile_token=data.turnstile_token,
        peer_ip=request.client.host if request.client else None,
        headers={k.lower(): v for k, v in request.headers.items()},
        corpus=data.corpus,
    )
    return Response(outcome.response, status_code=outcome.http_status, headers=outcome.headers)


def declare_request_constraints(openapi: OpenAPI, settings: Settings) -> None:
    """Write into the OpenAPI document what /ask enforces beyond the types: the question's length (a
    setting, so it can't be a static annotation), its pattern, and no fields but the declared ones.
    Fuzzers and client generators then produce only requests the server accepts."""
    schemas = openapi.components.schemas or {}
    ask = schemas["AskRequest"]
    ask.additional_properties = False
    question = (ask.properties or {})["question"]
    assert isinstance(question, Schema)
    question.min_length = 1
    question.max_length = settings.server.max_question_chars
    question.pattern = QUESTION_PATTERN
    question.description = (
        f"at most {settings.server.max_question_chars} characters (MAX_QUESTION_CHARS), not only whitespace, no NUL"
    )


def create_app(settings: Settings | None = None, services: Services | None = None) -> Litestar:
    """Build the app. Settings are read from the environment when not given; a bad value stops start-up."""
    settings = settings or load_settings()
    configure_logging(settings.server.log_level)

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        owned = services is None
        svc = services or await build_services(settings)
        app.state.services = svc
        try:
            yield
        finally:
            if owned:
                await svc.close()

    route_handlers: list[Any] = [healthz, corpora, corpus, passage, public_config, ask]
    if (WEB_DIR / "index.html").exists():
        route_handlers.append(
            create_static_files_router(path="/", directories=[Path(WEB_DIR)], html_mode=True, name="web")
        )
    cors = (
        CORSConfig(allow_origins=list(settings.server.cors_origins), allow_methods=["GET", "POST"], allow_headers=["*"])
        if settings.server.cors_origins
        else None
    )
    app = Litestar(
        route_handlers=route_handlers,
        lifespan=[lifespan],
        middleware=[request_middleware(settings.server.request_read_timeout_s)],
        before_send=[security_headers],
        exception_handlers={
            HTTPException: _handle_http,
            NotFoundException: _handle_http,
            ServiceError: _handle_service,
            Exception: _handle_any,
        },
        openapi_config=OpenAPIConfig(title="Provenance", version=__version__, path="/schema"),
        request_max_body_size=settings.server.request_max_body_bytes,
        cors_config=cors,
        debug=False,
        # Logging is configured once, by configure_logging above: Litestar's default would put a plain-text
        # handler of its own on the root logger, and asyncpg's and uvicorn's records would bypass the JSON.
        logging_config=None,
    )
    declare_request_constraints(app.openapi_schema, settings)
    return app
