"""POST /feedback's wire types. A verdict is a tagged union on `verdict`, so that `kind` exists only beside
"wrong": a `kind` sent with "right" is an unknown field, and the OpenAPI document says so by its types."""

from __future__ import annotations

from typing import Annotated, ClassVar, Literal

import msgspec

from provenance.wire import NO_CONTROLS, TEXT_PATTERN, TurnstileToken, Wire

NOTE_MAX_CHARS = 500
# A request id as the server hands them out (a UUID's hex, or a client's own X-Request-ID of 8-64 characters).
REQUEST_ID_MAX_CHARS = 64

Kind = Literal["wrong_answer", "should_have_answered", "other"]
KINDS: tuple[Kind, ...] = ("wrong_answer", "should_have_answered", "other")
RequestId = Annotated[
    str,
    msgspec.Meta(
        min_length=1,
        max_length=REQUEST_ID_MAX_CHARS,
        pattern=f"^{NO_CONTROLS}+$",
        description="the requestId of the /ask response being rated",
    ),
]
Note = Annotated[
    str,
    msgspec.Meta(
        max_length=NOTE_MAX_CHARS,
        pattern=TEXT_PATTERN,
        description=f"what the reader wants to add, at most {NOTE_MAX_CHARS} characters; kept as text, never HTML",
    ),
]


class _Verdict(Wire, forbid_unknown_fields=True):
    request_id: RequestId
    note: Note | None = None
    turnstile_token: TurnstileToken | None = None


class RightVerdict(_Verdict, tag_field="verdict", tag="right"):
    """The response was right."""

    verdict: ClassVar[Literal["right", "wrong"]] = "right"


class WrongVerdict(_Verdict, tag_field="verdict", tag="wrong"):
    """The response was wrong: the answer is wrong, it should have answered, or something else."""

    verdict: ClassVar[Literal["right", "wrong"]] = "wrong"

    kind: Kind | None = None


FeedbackRequest = RightVerdict | WrongVerdict


class FeedbackReceipt(Wire):
    request_id: str
    verdict: Literal["right", "wrong"]
    kind: Kind | None
    note: str
    # True when this verdict replaced this client's earlier one on the same response.
    replaced: bool
    rated_at: str
