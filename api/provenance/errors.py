"""Every exception the service raises, and the JSON envelope an error leaves the service in.

Exception
├── ServiceError              an HTTP status and a stable code: {"error": {"code", "message"}}
│   ├── BadRequest            400
│   ├── NotFound              404
│   ├── UnknownCorpus         404 unknown_corpus
│   ├── UnknownRequest        404 unknown_request (POST /feedback: no such answer to rate)
│   ├── ModelMismatch         409 embedding_model_mismatch
│   ├── DatabaseUnavailable   503 database_unavailable, Retry-After
│   └── Overloaded            503 overloaded, Retry-After
├── ConfigurationError        the deployment is wrong; an operator must fix it (the CLI says so and exits)
│   └── CorpusConflict        the corpus holds another folder's documents
└── ModelError                a model call failed; the request ends `blocked` with `model_error`
    └── ModelOutputError      the call was billed but its output was unusable
ValueError
└── SettingsError             a setting is missing or malformed; the message names the variable
RuntimeError
└── MigrationError            the migrations on disk disagree with the database's
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

import msgspec

from provenance.ports import Usage

# What went wrong with a model call, for the metrics (provenance_model_errors_total{kind}): the API was slow,
# said no, could not be reached, or sent something we could not read; or its output was cut off, called no
# tool, or did not parse.
ModelErrorKind = Literal[
    "timeout", "http_status", "connection", "malformed", "cut_off", "no_tool_call", "bad_output", "other"
]


class ErrorBody(msgspec.Struct, frozen=True):
    code: str
    message: str


class ErrorEnvelope(msgspec.Struct, frozen=True):
    error: ErrorBody


class ServiceError(Exception):
    """An error with an HTTP status and a stable machine-readable code."""

    def __init__(self, status: int, code: str, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.headers = headers or {}


class BadRequest(ServiceError):
    def __init__(self, message: str, code: str = "bad_request") -> None:
        super().__init__(400, code, message)


class NotFound(ServiceError):
    def __init__(self, message: str) -> None:
        super().__init__(404, "not_found", message)


class UnknownCorpus(ServiceError):
    def __init__(self, name: str, known: list[str]) -> None:
        have = ", ".join(repr(n) for n in known) if known else "none yet (run `provenance ingest`)"
        super().__init__(404, "unknown_corpus", f"there is no corpus named {name!r}; the corpora are: {have}")


class UnknownRequest(ServiceError):
    def __init__(self, request_id: str, window: str) -> None:
        super().__init__(
            404,
            "unknown_request",
            f"there is no answer with request id {request_id!r} to rate: answers can be rated for {window} after "
            "they are given",
        )


class DatabaseUnavailable(ServiceError):
    def __init__(self, message: str = "the database is unavailable; try again shortly") -> None:
        super().__init__(503, "database_unavailable", message, {"Retry-After": "5"})


class Overloaded(ServiceError):
    """More questions are waiting than the service can answer in time: the client should come back, the
    database is fine."""

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(503, "overloaded", message, {"Retry-After": str(retry_after_s)})


class ModelMismatch(ServiceError):
    def __init__(self, stored: str, configured: str) -> None:
        super().__init__(
            409,
            "embedding_model_mismatch",
            f"the passages were embedded with {stored!r} but EMBED_MODEL is {configured!r}; "
            "run `provenance ingest` with the new model (or set EMBED_MODEL back)",
        )


class ConfigurationError(Exception):
    """Raised for a state of the deployment an operator must fix (wrong embedding model, say)."""


class CorpusConflict(ConfigurationError):
    """The corpus holds another folder's documents; replacing them must be asked for."""


class ModelError(Exception):
    """A model call failed after bounded retries; the request ends `blocked` with `model_error`. `usage` is
    what a call that was billed cost (None when nothing was billed); `call` is which call failed
    (screening, generation, claims) and `kind` how."""

    def __init__(
        self, message: str, usage: Usage | None = None, *, call: str = "unknown", kind: ModelErrorKind = "other"
    ) -> None:
        super().__init__(message)
        self.usage = usage
        self.call = call
        self.kind: ModelErrorKind = kind


class ModelOutputError(ModelError):
    """The call succeeded and was billed, but its tool output was unusable; `usage` is what it cost. An
    output cut off at max_tokens carries what it got to (`partial`: the object as far as it was written)."""

    def __init__(
        self,
        message: str,
        usage: Usage,
        *,
        call: str = "unknown",
        kind: ModelErrorKind = "bad_output",
        partial: Mapping[str, object] | None = None,
    ) -> None:
        super().__init__(message, usage, call=call, kind=kind)
        self.partial = partial


class JudgeError(ModelError):
    """The reading judge failed (down, too slow, an HTTP error, a verdict that is neither Yes nor No): the
    request ends `blocked` with `judge_error`, never answered unchecked. Counted with `call="judge"`."""

    def __init__(self, message: str, usage: Usage | None = None, *, kind: ModelErrorKind = "other") -> None:
        super().__init__(message, usage, call="judge", kind=kind)


class SettingsError(ValueError):
    """A configuration value is missing or malformed; the message names the variable."""


class MigrationError(RuntimeError):
    """The migrations on disk disagree with what this database has applied."""


class UnreadableDocument(Exception):
    """A file ingest can't read (encrypted, scanned, corrupt, truncated, empty, or of a format it doesn't
    know). Its message is the one-line reason ingest prints beside the file's name; the rest ingest."""
