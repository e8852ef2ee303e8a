"""POST /feedback: a reader's verdict on an /ask response ("Was this right?"), and what the OpenAPI document
says of it beyond its types. The work is provenance.feedback.desk's."""

from __future__ import annotations

import re
from typing import Any

from litestar import Request, Response, post
from litestar.datastructures import State
from litestar.di import NamedDependency
from litestar.exceptions import ValidationException
from litestar.openapi import ResponseSpec
from litestar.openapi.spec import OpenAPI
from litestar.params import JSONBody

from provenance.errors import ErrorBody, ErrorEnvelope, ServiceError
from provenance.feedback.schema import FeedbackReceipt, FeedbackRequest, RightVerdict, WrongVerdict
from provenance.http.exceptions import _handle_http
from provenance.services import Services


async def _require_json(request: Request[Any, Any, Any]) -> None:
    content_type = request.headers.get("content-type", "")
    if content_type.split(";")[0].strip().lower() != "application/json":
        raise ServiceError(415, "unsupported_media_type", "send the verdict as application/json")


def _spec(description: str) -> ResponseSpec:
    return ResponseSpec(ErrorEnvelope, description=description, generate_examples=False)


# The framework's validation messages (provenance.http.messages), reworded where /feedback can say more.
_REWORDED = (
    (
        re.compile(r'^.*does not take: "kind".*$'),
        'the request body has "kind", which goes only with "verdict": "wrong"',
    ),
    (re.compile(r"^invalid value .* \(verdict\)$"), 'verdict must be "right" or "wrong"'),
    (
        re.compile(r"^invalid enum value (.*) \(kind\)$"),
        r'kind must be "wrong_answer", "should_have_answered" or "other", not \1',
    ),
    (re.compile(r'such as \{"question": "..."\}'), 'such as {"requestId": "...", "verdict": "right"}'),
)


def _reworded(request: Request[Any, Any, Any], exc: ValidationException) -> Response[Any]:
    response = _handle_http(request, exc)
    envelope = response.content
    if not isinstance(envelope, ErrorEnvelope):
        return response
    message = envelope.error.message
    for pattern, words in _REWORDED:
        if pattern.search(message):
            message = pattern.sub(words, message)
            break
    return Response(
        ErrorEnvelope(ErrorBody(code=envelope.error.code, message=message)),
        status_code=response.status_code,
        headers=dict(response.headers),
    )


@post(
    "/feedback",
    summary='A reader\'s verdict on an answer or refusal ("Was this right?")',
    description="`requestId` is the /ask response's. A client's second verdict on a response replaces its "
    "first; another client's never does. Rated responses are those of the last FEEDBACK_WINDOW_S.",
    before_request=_require_json,
    exception_handlers={ValidationException: _reworded},
    status_code=200,
    responses={
        400: _spec("`bad_request`: unknown fields, wrong types, a note over 500 characters, a control character"),
        401: _spec("`invalid_api_key`: unknown or revoked API key"),
        403: _spec("`bot_check_failed`: the Turnstile token was missing, used or wrong"),
        404: _spec("`unknown_request`: no answer with that request id in the window"),
        413: _spec("the body is larger than REQUEST_MAX_BODY_BYTES"),
        415: _spec("not application/json"),
        429: _spec("`rate_limited`: FEEDBACK_RATE_LIMIT_PER_HOUR is used up; see Retry-After"),
        503: _spec("`database_unavailable` or `overloaded`; see Retry-After"),
    },
)
async def feedback(
    request: Request[Any, Any, State], data: JSONBody[FeedbackRequest], services: NamedDependency[Services]
) -> FeedbackReceipt:
    desk = services.feedback
    if desk is None:  # the route is only mounted with feedback on (create_app)
        raise ServiceError(404, "not_found", "feedback is turned off on this server (FEEDBACK_ENABLED)")
    return await desk.submit(
        data,
        peer_ip=request.client.host if request.client else None,
        headers={k.lower(): v for k, v in request.headers.items()},
    )


def declare_feedback_constraints(openapi: OpenAPI) -> None:
    """No fields but the declared ones, in each variant: fuzzers then send only what the server takes."""
    schemas = openapi.components.schemas or {}
    for variant in (RightVerdict, WrongVerdict):
        schema = schemas.get(variant.__name__)
        if schema is not None:
            schema.additional_properties = False
