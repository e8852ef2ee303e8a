"""The Litestar app factory: the routes (provenance.http.routes) with their middleware and exception handling
(provenance.http.middleware, provenance.http.exceptions), the web page, CORS and the lifespan that builds the
services and hands them to every route."""

from __future__ import annotations

import asyncio
import gc
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from pathlib import Path
from typing import Any

from litestar import Litestar
from litestar.config.cors import CORSConfig
from litestar.di import Provide
from litestar.openapi import OpenAPIConfig
from litestar.static_files import create_static_files_router

from provenance import __version__
from provenance.http.corpus_admin import CORPUS_ADMIN_ROUTES, declare_corpus_admin_constraints
from provenance.http.documents import DOCUMENT_ROUTES, declare_job_events
from provenance.http.exceptions import EXCEPTION_HANDLERS
from provenance.http.feedback import declare_feedback_constraints
from provenance.http.feedback import feedback as feedback_endpoint
from provenance.http.inputs import CheckedRequest, declare_string_rule
from provenance.http.key_info import KEY_ROUTES
from provenance.http.metrics_route import count_response, metrics_endpoint
from provenance.http.middleware import request_middleware, security_headers
from provenance.http.routes import ROUTES, declare_request_constraints, provide_services
from provenance.http.sources import SOURCE_ROUTES, declare_source_constraints
from provenance.http.streaming import declare_streaming
from provenance.ingest.memory import bound_allocator
from provenance.jobs.priority import LowPriorityEmbedder
from provenance.jobs.worker import Worker
from provenance.logs import configure_logging
from provenance.metrics import worker_stopped
from provenance.services import Services, build_services, load_embedder
from provenance.settings import REPO_ROOT, Settings, load_settings

WEB_DIR = REPO_ROOT / "web"


def create_app(settings: Settings | None = None, services: Services | None = None) -> Litestar:
    """Build the app. Settings are read from the environment when not given; a bad value stops start-up."""
    settings = settings or load_settings()
    configure_logging(settings.server.log_level)
    route_handlers, before_send = _routes(settings)
    app = Litestar(
        route_handlers=route_handlers,
        lifespan=[_lifespan(settings, services)],
        middleware=[request_middleware(settings.server.request_read_timeout_s)],
        before_send=before_send,
        exception_handlers=EXCEPTION_HANDLERS,
        dependencies={"services": Provide(provide_services, sync_to_thread=False)},
        openapi_config=OpenAPIConfig(title="Provenance", version=__version__, path="/schema"),
        request_max_body_size=settings.server.request_max_body_bytes,
        # Every JSON body's strings are checked as it is decoded (provenance.http.inputs).
        request_class=CheckedRequest,
        cors_config=_cors(settings),
        debug=False,
        # Logging is configured once, by configure_logging above: Litestar's default would put a plain-text
        # handler of its own on the root logger, and asyncpg's and uvicorn's records would bypass the JSON.
        logging_config=None,
    )
    declare_request_constraints(app.openapi_schema, settings)
    declare_streaming(app.openapi_schema)
    declare_job_events(app.openapi_schema)
    declare_feedback_constraints(app.openapi_schema)
    declare_corpus_admin_constraints(app.openapi_schema)
    declare_source_constraints(app.openapi_schema)
    # Last, so that it sees every other declaration: the string rule on every parameter and body string.
    declare_string_rule(app.openapi_schema)
    return app


def _lifespan(settings: Settings, services: Services | None) -> Callable[[Litestar], AbstractAsyncContextManager[None]]:
    """Start-up and shut-down: the services (built here unless given), and the ingest workers beside the API."""

    @asynccontextmanager
    async def lifespan(app: Litestar) -> AsyncIterator[None]:
        owned = services is None
        svc = services or await build_services(settings)
        app.state.services = svc
        # What start-up made (the imports, the models, the app) lives as long as the process: moved out of the
        # cyclic collector's sight, a full collection walks only what requests made since. Without it, every
        # few seconds of cached traffic a full collection walked the whole heap for 100-150 ms, holding every
        # request (issue 48).
        gc.collect()
        gc.freeze()
        # Ingest workers beside the API (INGEST_WORKERS): each loads an embedder of its own only while a job
        # runs, as `provenance ingest` does, on INGEST_THREADS threads (a core each by default) INGEST_NICE
        # below the API's, so that questions come first on every core; and the allocator bounded as that
        # command's is, while workers run here.
        ingest_threads, nice = settings.ingest.threads, settings.ingest.nice
        if settings.ingest.workers:
            bound_allocator()
        ingest = [
            Worker(
                settings,
                svc.pool,
                lambda: LowPriorityEmbedder(
                    lambda: load_embedder(settings, for_ingest=True, threads=1), nice, threads=ingest_threads
                ),
                on_done=svc.pipeline.corpora.look_soon,
            )
            for _ in range(settings.ingest.workers)
        ]
        # An upload or a removal queued here wakes them (provenance.http.documents).
        app.state.ingest_workers = ingest
        workers = [asyncio.create_task(w.run()) for w in ingest]
        try:
            yield
        finally:
            for task in workers:
                task.cancel()
            await asyncio.gather(*workers, return_exceptions=True)
            if owned:
                await svc.close()
            if settings.metrics.enabled:
                worker_stopped()

    return lifespan


def _routes(settings: Settings) -> tuple[list[Any], list[Any]]:
    """The route handlers and the before-send hooks, as the settings turn parts on and off."""
    route_handlers: list[Any] = [*CORPUS_ADMIN_ROUTES, *ROUTES, *DOCUMENT_ROUTES, *KEY_ROUTES, *SOURCE_ROUTES]
    before_send: list[Any] = [security_headers]
    if settings.metrics.enabled:
        # Off, /metrics is not there at all (an unknown path's 404) and nothing is counted per request.
        route_handlers.append(metrics_endpoint)
        before_send.append(count_response)
    if settings.feedback.enabled:
        # Off, POST /feedback is not there at all, and /config tells the page not to ask.
        route_handlers.append(feedback_endpoint)
    if (WEB_DIR / "index.html").exists():
        route_handlers.append(
            create_static_files_router(path="/", directories=[Path(WEB_DIR)], html_mode=True, name="web")
        )
    return route_handlers, before_send


def _cors(settings: Settings) -> CORSConfig | None:
    if not settings.server.cors_origins:
        return None
    return CORSConfig(
        allow_origins=list(settings.server.cors_origins),
        allow_methods=["GET", "POST", "DELETE"],
        allow_headers=["*"],
    )
