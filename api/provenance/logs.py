"""structlog JSON logs; the request id rides in a contextvar so every line of a request carries it.

Records from the standard library's logging (asyncpg, uvicorn, the HTTP clients) are rendered as the same
JSON lines, so a log reader never meets a plain-text line or a multi-line traceback among them."""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping, MutableMapping
from typing import Any

import structlog

# httpx for Turnstile; the anthropic SDK sends through its own fork, httpx2 (with httpcore2).
_CHATTY = ("httpx", "httpcore", "httpx2", "httpcore2")
# uvicorn installs handlers of its own (plain text) that don't propagate; ours render them instead.
_UVICORN = ("uvicorn", "uvicorn.error", "uvicorn.access")
# While the database doesn't answer, asyncpg's pool retries its minimum size every few seconds and logs
# each failed try with the whole traceback of a connect timeout: one line with the error says as much.
_EXPECTED_OUTAGE = (TimeoutError, OSError, ConnectionError)

_SECRET_KEYS = {"authorization", "api_key", "apikey", "secret", "token", "turnstile_token", "password"}


def _redact(_: Any, __: str, event: MutableMapping[str, Any]) -> Mapping[str, Any]:
    # Secrets must never reach a log line, whatever a caller passes by mistake.
    for key in list(event):
        if key.lower() in _SECRET_KEYS or key.lower().endswith(("_secret", "_token", "_key")):
            event[key] = "[redacted]"
    return event


class _Stderr:
    """Whatever sys.stderr is at the moment of writing (test runners and daemons swap it)."""

    def write(self, text: str) -> int:
        return sys.stderr.write(text)

    def flush(self) -> None:
        sys.stderr.flush()


class _OutageWithoutTraceback(logging.Filter):
    """asyncpg's reconnect warnings keep their message and name the error, without its traceback."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        if record.name.startswith("asyncpg") and isinstance(exc, _EXPECTED_OUTAGE):
            record.msg = f"{record.getMessage()}: {exc!r}"
            record.args = None
            record.exc_info = None
            record.exc_text = None
        return True


def _stdlib_handler() -> logging.Handler:
    # No request id here: a library's background task (asyncpg's pool refilling itself) inherits the context
    # of the request that happened to start it, and would carry that request's id long after it ended.
    shared: list[Any] = [
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
    ]
    handler = logging.StreamHandler(_Stderr())
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(
            foreign_pre_chain=shared,
            processors=[
                structlog.stdlib.ProcessorFormatter.remove_processors_meta,
                _redact,
                structlog.processors.format_exc_info,
                structlog.processors.JSONRenderer(),
            ],
        )
    )
    handler.addFilter(_OutageWithoutTraceback())
    return handler


def configure_logging(level: str = "info") -> None:
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        numeric = logging.INFO
    logging.basicConfig(handlers=[_stdlib_handler()], level=numeric, force=True)
    for name in _UVICORN:
        logger = logging.getLogger(name)
        logger.handlers.clear()
        logger.propagate = True
    # httpx logs every request it sends at INFO (each Anthropic and Turnstile call, as a plain-text line
    # among the JSON); that is for debugging, not the default.
    for chatty in _CHATTY:
        logging.getLogger(chatty).setLevel(numeric if numeric <= logging.DEBUG else max(numeric, logging.WARNING))
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            _redact,
            structlog.processors.format_exc_info,
            structlog.processors.JSONRenderer(),
        ],
        wrapper_class=structlog.make_filtering_bound_logger(numeric),
        logger_factory=structlog.PrintLoggerFactory(file=_Stderr()),  # type: ignore[arg-type]
        cache_logger_on_first_use=False,
    )


def get_logger(name: str) -> Any:
    return structlog.get_logger(name)
