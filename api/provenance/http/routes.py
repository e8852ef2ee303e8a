"""The routes: /healthz, /corpora, /corpus, /passages, /config and /ask, and what the OpenAPI document says of
/ask beyond its types. Each handler gets the running `Services` injected as `services` (provide_services)."""

from __future__ import annotations

import asyncio
import re
import uuid
from typing import Annotated, Any

import msgspec
from litestar import Request, Response, get, post
from litestar.datastructures import State
from litestar.di import NamedDependency
from litestar.openapi import ResponseSpec
from litestar.openapi.spec import OpenAPI, Schema
from litestar.params import FromPath, JSONBody, Parameter
from litestar.response import ServerSentEvent

from provenance import __version__, metrics
from provenance.access.clients import Client
from provenance.access.identify import identify
from provenance.claims.judge import independent_of_generator, judge_relation
from provenance.errors import BadRequest, ErrorEnvelope, NotFound, Overloaded, ServiceError, UnknownCorpus
from provenance.http.conversations import CONVERSATION_ROUTES
from provenance.http.streaming import stream_ask, wants_stream
from provenance.pipeline.run import OnStage, Outcome
from provenance.services import Services
from provenance.settings import Settings
from provenance.wire import (
    CORPUS_NAME_MAX_CHARS,
    CORPUS_NAME_PATTERN,
    QUESTION_PATTERN,
    AskRequest,
    AskResponse,
    Corpora,
    CorpusExample,
    CorpusFile,
    CorpusInfo,
    CorpusSummary,
    Health,
    JudgeInfo,
    PassageOut,
    PublicConfig,
    default_of,
)

_ERROR = "an error, as {error: {code, message}}"
_DB_DOWN = ResponseSpec(ErrorEnvelope, description="the database is unavailable", generate_examples=False)
_UNAVAILABLE = ResponseSpec(
    ErrorEnvelope,
    description="`overloaded` (more questions than can start within ASK_QUEUE_TIMEOUT_S) or"
    " `database_unavailable`; see Retry-After",
    generate_examples=False,
)
_QUESTION = re.compile(QUESTION_PATTERN)
# A corpus named in a query string is held to the rule a body's `corpus` is (wire.CorpusName): declared in the
# OpenAPI document, and checked by Litestar (a 400 naming the parameter). A well-formed name no corpus has is
# the 404 that lists the corpora.
CorpusParameter = Annotated[
    str | None,
    Parameter(
        pattern=CORPUS_NAME_PATTERN,
        max_length=CORPUS_NAME_MAX_CHARS,
        description="a corpus from GET /corpora; the default corpus when absent",
    ),
]


def _errors(*statuses: int) -> dict[int, ResponseSpec]:
    return {s: ResponseSpec(ErrorEnvelope, description=_ERROR, generate_examples=False) for s in statuses}


def provide_services(state: State) -> Services:
    """The dependency every route declares as `services`: what the lifespan built (create_app)."""
    services: Services = state.services
    return services


@get(
    "/healthz",
    summary="Liveness and readiness: database, passage count, profile, version",
    description="`passages` counts the public corpora's passages, and `corpusVersion` is the default corpus's:"
    " nothing here tells of a private corpus.",
    responses={503: ResponseSpec(Health, description="the database is down", generate_examples=False)},
)
async def healthz(services: NamedDependency[Services]) -> Response[Health]:
    busy = False
    # Twice the pool's own wait, so that a busy pool answers with its verdict (Overloaded) before this gives up.
    limit_s = 2 * services.settings.database.timeout_s
    try:
        await asyncio.wait_for(services.store.ping(), timeout=limit_s)
        found = await asyncio.wait_for(services.store.corpora(), timeout=limit_s)
        private = await asyncio.wait_for(services.access.private_corpora(), timeout=limit_s)
        public = {c.name: c for c in found if c.name not in private}
        count: int | None = sum(c.passage_count for c in public.values())
        corpus = public.get(default_of(public))
        db_up = True
    except Overloaded:
        # Every pooled connection is in use: the database is answering, this server is busy.
        count, corpus, db_up, busy = None, None, True, True
    except Exception:
        count, corpus, db_up = None, None, False
        metrics.database_unavailable("healthz")
    body = Health(
        status="ok" if db_up and not busy else "degraded",
        database="up" if db_up else "down",
        passages=count,
        profile=services.settings.profile,
        model=services.settings.profile_model,
        version=__version__,
        embed_model=services.settings.embedding.model,
        corpus_version=corpus.version if corpus else None,
        judge=judge_info(services),
    )
    return Response(body, status_code=200 if db_up else 503)


def judge_info(services: Services) -> JudgeInfo | None:
    judge = services.profile.judge
    if judge is None:
        return None
    return JudgeInfo(
        model=judge.model,
        server=judge.server,
        calibrated=judge.calibrated,
        independent=independent_of_generator(services.settings, judge.model),
        failure=judge.failure(),
        relation=judge_relation(services.settings, judge.model),
    )


def _examples(raw: list[dict[str, Any]]) -> list[CorpusExample]:
    return [CorpusExample(question=e["question"], covered=e.get("covered", True)) for e in raw]


async def _client(services: Services, request: Request[Any, Any, Any]) -> Client:
    return await identify(services.access, request.headers.get("authorization"))


_UNAUTHORIZED = ResponseSpec(
    ErrorEnvelope, description="`invalid_api_key`: unknown or revoked API key", generate_examples=False
)


@get(
    "/corpora",
    summary="The corpora /ask can answer from, each with its title, description and example questions",
    description="Only those the client may read: the public ones, and with an API key the private ones it is"
    " granted (all of them for an admin).",
    responses={401: _UNAUTHORIZED, 503: _DB_DOWN},
)
async def corpora(request: Request[Any, Any, State], services: NamedDependency[Services]) -> Corpora:
    client = await _client(services, request)
    found = await services.store.corpora()
    # Read after the corpora: a corpus is recorded (private or not) before it holds any passage, so every
    # private one listed above is private here, whatever was created meanwhile.
    recorded = await services.access.corpus_access()
    private = client.private | {n for n, a in recorded.items() if a.visibility == "private"}
    client = msgspec.structs.replace(client, private=private)
    shown = [c for c in found if client.reads(c.name)]
    default = default_of([c.name for c in found], private)
    return Corpora(
        default=default if any(c.name == default for c in shown) and default not in private else None,
        corpora=[
            CorpusSummary(
                name=c.name,
                title=(recorded[c.name].title if c.name in recorded else "") or c.title or c.name,
                description=c.description,
                examples=_examples(c.examples),
                passage_count=c.passage_count,
                version=c.version,
                private=c.name in private,
            )
            for c in shown
        ],
    )


@get(
    "/corpus",
    summary="One corpus in full (the default one without `name`): files, passage count, version, model",
    responses={**_errors(404), 401: _UNAUTHORIZED, 503: _DB_DOWN},
)
async def corpus(
    request: Request[Any, Any, State], services: NamedDependency[Services], name: CorpusParameter = None
) -> CorpusInfo:
    client = await _client(services, request)
    wanted = await services.pipeline.corpora.resolve(name, client)
    st = await services.store.corpus_state(wanted)
    if st is None:
        if name is not None:
            raise UnknownCorpus(name, client.visible(c.name for c in await services.store.corpora()))
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
    responses={**_errors(404), 401: _UNAUTHORIZED, 503: _DB_DOWN},
)
async def passage(
    request: Request[Any, Any, State],
    services: NamedDependency[Services],
    passage_id: FromPath[str],
    corpus: CorpusParameter = None,
) -> PassageOut:
    client = await _client(services, request)
    in_corpus = await services.pipeline.corpora.resolve(corpus, client)
    # No NUL reaches the store: provenance.http.inputs refuses it before any handler runs. An id has no
    # length bound (a file's path and its headings' slugs make it), so a long one is simply not there.
    found = await services.store.passage(passage_id.lstrip("/"), in_corpus)
    if found is None:
        raise NotFound(f"no passage with id {passage_id.lstrip('/')!r}")
    return found


@get("/config", summary="What the page needs to know: profile, Turnstile site key, question length")
async def public_config(services: NamedDependency[Services]) -> PublicConfig:
    # No database read: the page can say how to ask while the database is down. Its corpora and their
    # examples come from /corpora.
    return PublicConfig(
        profile=services.settings.profile,
        model=services.settings.profile_model,
        turnstile_site_key=services.settings.guards.turnstile_site_key,
        max_question_chars=services.settings.server.max_question_chars,
        judge=judge_info(services),
        feedback=services.feedback is not None,
    )


async def _require_json(request: Request[Any, Any, Any]) -> None:
    content_type = request.headers.get("content-type", "")
    if content_type.split(";")[0].strip().lower() != "application/json":
        raise ServiceError(415, "unsupported_media_type", "send the question as application/json")


@post(
    "/ask",
    summary="Answer a question from the documents, or refuse with the evidence shown",
    description="With `Accept: text/event-stream`, the stages as they complete, then the answer"
    " (provenance.http.streaming). With `conversationId`, a follow-up in that conversation: `404`"
    " `unknown_conversation` when it is unknown, expired or another client's; `409` `conversation_corpus` for"
    " another corpus than the conversation's, `conversation_full` past CONVERSATION_MAX_TURNS.",
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
async def ask(
    request: Request[Any, Any, State], data: JSONBody[AskRequest], services: NamedDependency[Services]
) -> Response[AskResponse] | ServerSentEvent:
    # Exactly the constraints the OpenAPI document declares (see declare_request_constraints).
    if len(data.question) > services.settings.server.max_question_chars:
        raise BadRequest(
            f"question is {len(data.question)} characters; the limit is {services.settings.server.max_question_chars}",
            code="invalid_question",
        )
    if _QUESTION.search(data.question) is None:
        # A control character was refused as the body was decoded (provenance.http.inputs), so only
        # whitespace is left to fail the pattern.
        raise BadRequest("question must not be empty", code="invalid_question")
    question = data.question.strip()
    request_id: str = request.scope.get("state", {}).get("request_id") or uuid.uuid4().hex

    async def run(on_stage: OnStage | None = None) -> Outcome:
        outcome = await services.pipeline.ask(
            question,
            request_id=request_id,
            turnstile_token=data.turnstile_token,
            peer_ip=request.client.host if request.client else None,
            headers={k.lower(): v for k, v in request.headers.items()},
            corpus=data.corpus,
            conversation_id=data.conversation_id,
            on_stage=on_stage,
        )
        if services.feedback is not None:
            # Kept so that a reader can rate it (POST /feedback): a list append here, written in batches.
            services.feedback.responses.keep(outcome.response, outcome.served_from)
        return outcome

    if wants_stream(request):
        return await stream_ask(run, request_id, request.url.path)
    outcome = await run()
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
        " or other control character but tab, line feed and carriage return"
    )


ROUTES = [healthz, corpora, corpus, passage, public_config, ask, *CONVERSATION_ROUTES]
