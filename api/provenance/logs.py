"""structlog JSON logs; the request id rides in a contextvar so every line of a request carries it."""

from __future__ import annotations

import logging
import sys
from collections.abc import Mapping, MutableMapping
from typing import Any

import structlog

# httpx for Turnstile; the anthropic SDK sends through its own fork, httpx2 (with httpcore2).
_CHATTY = ("httpx", "httpcore", "httpx2", "httpcore2")

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


def configure_logging(level: str = "info") -> None:
    numeric = logging.getLevelName(level.upper())
    if not isinstance(numeric, int):
        numeric = logging.INFO
    logging.basicConfig(format="%(message)s", stream=_Stderr(), level=numeric, force=True)
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
