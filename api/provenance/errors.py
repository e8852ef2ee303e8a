"""Every error leaves the service as JSON {"error": {"code", "message"}} with the right HTTP status."""

from __future__ import annotations

import msgspec


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


class DatabaseUnavailable(ServiceError):
    def __init__(self, message: str = "the database is unavailable; try again shortly") -> None:
        super().__init__(503, "database_unavailable", message, {"Retry-After": "5"})


class Overloaded(ServiceError):
    """More questions are waiting than the service can answer in time: the client should come back, the
    database is fine."""

    def __init__(self, message: str, retry_after_s: int) -> None:
        super().__init__(503, "overloaded", message, {"Retry-After": str(retry_after_s)})


class ConfigurationError(Exception):
    """Raised for a state of the deployment an operator must fix (wrong embedding model, say)."""


class UnreadableDocument(Exception):
    """A file ingest can't read (encrypted, scanned, corrupt, truncated, empty, or of a format it doesn't
    know). Its message is the one-line reason ingest prints beside the file's name; the rest ingest."""
