"""Exception handling: every error leaves as JSON {"error": {"code", "message"}} with its status, in our words
(the framework's messages are reworded by provenance.http.messages)."""

from __future__ import annotations

import asyncio
from typing import Any

import asyncpg
import msgspec
from litestar import Request, Response
from litestar.exceptions import HTTPException, NotFoundException, ValidationException
from litestar.response.base import ASGIResponse
from litestar.types import ExceptionHandlersMap

from provenance import metrics
from provenance.errors import DatabaseUnavailable, ErrorBody, ErrorEnvelope, Overloaded, ServiceError
from provenance.http import messages
from provenance.logs import get_logger

log = get_logger("provenance.http")

_DB_ERRORS = (
    OSError,
    asyncpg.PostgresConnectionError,
    asyncpg.InterfaceError,
    # Shutting down, starting up, or cancelled by an operator: the database, not the request, is at fault.
    asyncpg.exceptions.OperatorInterventionError,
    asyncpg.exceptions.TooManyConnectionsError,
    asyncio.TimeoutError,
)


def _error(status: int, code: str, message: str, headers: dict[str, str] | None = None) -> Response[Any]:
    return Response(ErrorEnvelope(ErrorBody(code=code, message=message)), status_code=status, headers=headers or {})


def error_response(error: ServiceError) -> ASGIResponse:
    """A service error as the ASGI app that answers it, for a middleware that refuses a request before the
    route's handler (and so its exception handling) is called."""
    return ASGIResponse(
        body=msgspec.json.encode(ErrorEnvelope(ErrorBody(code=error.code, message=error.message))),
        status_code=error.status,
        media_type="application/json",
        headers=error.headers,
    )


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
            message = messages.validation_message(
                str(first.get("message", message)),
                first.get("key"),
                str(getattr(first.get("source"), "value", first.get("source"))),
            )
    elif exc.status_code == 404:
        message = messages.not_found_message(request.url.path)
    elif exc.status_code == 405:
        allow = (exc.headers or {}).get("allow") or (exc.headers or {}).get("Allow")
        message = messages.method_message(request.method, request.url.path, allow)
    elif exc.status_code == 413:
        limit = request.app.request_max_body_size
        message = messages.too_large_message(limit if isinstance(limit, int) else None)
    if exc.status_code == 400 and messages.is_not_json(str(exc.detail)):
        message = "the request body is not valid JSON"
    return _error(exc.status_code, _HTTP_CODES.get(exc.status_code, "http_error"), message, exc.headers)


def _handle_service(request: Request[Any, Any, Any], exc: ServiceError) -> Response[Any]:
    if isinstance(exc, Overloaded):
        metrics.overloaded()
    elif isinstance(exc, DatabaseUnavailable):
        metrics.database_unavailable("request")
    return _error(exc.status, exc.code, exc.message, exc.headers)


def service_error_for(exc: Exception, path: str) -> ServiceError:
    """The error a failure other than the framework's leaves as: the service's own, a database outage, or an
    internal error (logged with its traceback). Also what a streamed /ask sends as its `error` event."""
    if isinstance(exc, ServiceError):
        return exc
    if isinstance(exc, _DB_ERRORS):
        log.warning("database unavailable", error=repr(exc))
        metrics.database_unavailable("request")
        return DatabaseUnavailable()
    log.error("unhandled error", path=path, exc_info=exc)
    return ServiceError(500, "internal_error", "something went wrong on our side; the error was logged")


def _handle_any(request: Request[Any, Any, Any], exc: Exception) -> Response[Any]:
    error = service_error_for(exc, request.url.path)
    return _error(error.status, error.code, error.message, error.headers)


EXCEPTION_HANDLERS: ExceptionHandlersMap = {
    HTTPException: _handle_http,
    NotFoundException: _handle_http,
    ServiceError: _handle_service,
    Exception: _handle_any,
}
