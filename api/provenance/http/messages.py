"""The framework's error messages (msgspec's validation errors, Litestar's 404/405/413) in our words.

A client sees "question must be a string, not a number", not "Expected `str`, got `int` (field 'question')";
nothing here changes a status or an error code, only the sentence that explains it."""

from __future__ import annotations

import re

from provenance.wire import CORPUS_NAME_PATTERN

_TYPE_WORDS = {
    "str": "a string",
    "int": "a number",
    "float": "a number",
    "bool": "true or false",
    "null": "null",
    "object": "a JSON object",
    "array": "an array",
}

_EXPECTED = re.compile(r"^Expected `(?P<want>[^`]+)`, got `(?P<got>[^`]+)`")
_TOO_LONG = re.compile(r"^Expected `str` of length <= (?P<n>\d+)")
_TOO_SHORT = re.compile(r"^Expected `str` of length >= (?P<n>\d+)")
_NO_MATCH = re.compile(r"^Expected `str` matching regex (?P<pattern>'.*')")
_UNKNOWN = re.compile(r"^Object contains unknown field `(?P<name>[^`]+)`")
_MISSING = re.compile(r"^Object missing required field `(?P<name>[^`]+)`")
_NOT_JSON = ("json is malformed", "input data was truncated", "trailing characters", "utf-8", "decode")
# Litestar names the whole request body "data" (the handler's parameter), not a field a client sent.
_BODY_KEY = "data"


def _type_words(spec: str) -> str:
    """`str | null` -> "a string or null"."""
    parts = [_TYPE_WORDS.get(part.strip(), part.strip()) for part in spec.split("|")]
    return " or ".join(parts)


def _camel(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(part.title() for part in rest)


def is_not_json(message: str) -> bool:
    """msgspec's and Litestar's ways of saying the body could not be parsed at all."""
    return any(marker in message.lower() for marker in _NOT_JSON)


def validation_message(message: str, key: str | None, source: str | None = None) -> str:
    """One msgspec/Litestar validation error about the request body or a parameter (`source`: "query",
    "path"), as a sentence for the client."""
    if is_not_json(message):
        return "the request body is not valid JSON"
    field = None if key in (None, "", _BODY_KEY) else key
    if field and source in ("query", "path"):
        field = f"{source} parameter {field!r}"
    if field and (m := _TOO_LONG.match(message)):
        return f"{field} is longer than {m['n']} characters"
    if field and (m := _TOO_SHORT.match(message)):
        return f"{field} must not be empty" if m["n"] == "1" else f"{field} is shorter than {m['n']} characters"
    if field and (m := _NO_MATCH.match(message)):
        if m["pattern"] == repr(CORPUS_NAME_PATTERN):
            return (
                f"{field} is not a corpus name: a lowercase letter or digit, then up to 39 lowercase letters,"
                " digits, '-' or '_'"
            )
        return f"{field} must match the pattern {m['pattern']}"
    if m := _EXPECTED.match(message):
        want, got = _type_words(m["want"]), _type_words(m["got"])
        if field is None:
            return f'the request body must be a JSON object such as {{"question": "..."}}, not {got}'
        return f"{field} must be {want}, not {got}"
    if m := _UNKNOWN.match(message):
        name = m["name"]
        hint = f' (did you mean "{_camel(name)}"? field names are camelCase)' if _camel(name) != name else ""
        return f'the request body has a field this endpoint does not take: "{name}"{hint}'
    if m := _MISSING.match(message):
        return f'the request body needs a "{m["name"]}" field'
    return message[:1].lower() + message[1:] + (f" ({field})" if field else "")


def not_found_message(path: str) -> str:
    return f"there is no page, file or endpoint at {path}"


def method_message(method: str, path: str, allow: str | None) -> str:
    allowed = [m.strip() for m in (allow or "").split(",") if m.strip() and m.strip() not in {"OPTIONS", "HEAD"}]
    if not allowed:
        return f"{path} does not take {method} requests"
    return f"{path} takes {' or '.join(allowed)}, not {method}"


def too_large_message(limit_bytes: int | None) -> str:
    if not limit_bytes:
        return "the request body is too large"
    size = f"{limit_bytes // 1024} KiB" if limit_bytes % 1024 == 0 else f"{limit_bytes} bytes"
    return f"the request body is too large; the limit is {size}"
