"""What any string a request carries may hold, checked once for every endpoint: the query string and the path
parameters (`url_problem`, called by provenance.http.middleware after routing) and every string of a JSON body
(`CheckedRequest`, the app's request class, as the body is decoded). A string that breaks the rule is a `400`
naming its field; the OpenAPI document declares the same rule on every string (`declare_string_rule`), so a
request valid by the schema is never refused for its characters.

The rule: no NUL (Postgres `text` can't store it, so it failed in the driver as a 500), no other control
character but tab, line feed and carriage return (C0, DEL and C1: nothing a question, note, name or id holds;
they are binary garbage or terminal escapes, and a log line or a page would carry them on), no lone surrogate
and no percent-escape that is not UTF-8 (neither is text: Postgres and every encoder refuse them, and a
decoder that replaces them with U+FFFD would answer for a string the client never sent)."""

from __future__ import annotations

import json
import re
from typing import Any
from urllib.parse import unquote_to_bytes

from litestar import Request
from litestar.exceptions import SerializationException
from litestar.openapi.spec import (
    OpenAPI,
    OpenAPIMediaType,
    OpenAPIResponse,
    Operation,
    Parameter,
    Reference,
    RequestBody,
    Schema,
)
from litestar.openapi.spec.enums import OpenAPIType

from provenance.errors import BadRequest
from provenance.wire import CONTROLS, TEXT_PATTERN

# The characters no string may hold, as one character class (wire.CONTROLS, what the OpenAPI document's
# patterns exclude) and the surrogates. These are left out of the patterns: a JSON Schema pattern is an
# ECMA-262 regex, which reads a string as UTF-16 code units, where every character past U+FFFF is a surrogate
# pair; and no valid JSON text or UTF-8 holds a lone one, so a schema-valid request can't either.
_FORBIDDEN = re.compile(f"[{CONTROLS}\ud800-\udfff]")


def _named(char: str, not_utf8: bool) -> str:
    if char == "\x00":
        return "a NUL character"
    if "\ud800" <= char <= "\udfff":
        # Read with surrogateescape, a body's bytes that are not UTF-8 are lone surrogates too.
        return "bytes that are not UTF-8" if not_utf8 else f"a lone surrogate (U+{ord(char):04X}), which is not text"
    return f"a control character (U+{ord(char):04X})"


def problem_in(text: str, field: str, *, not_utf8: bool = False) -> BadRequest | None:
    """The 400 for `field` when `text` holds a character no string may hold, else None."""
    found = _FORBIDDEN.search(text)
    if found is None:
        return None
    return BadRequest(f"{field} contains {_named(found.group(), not_utf8)}")


def _decoded(raw: bytes, field: str) -> str | BadRequest:
    try:
        return unquote_to_bytes(raw).decode("utf-8")
    except UnicodeDecodeError:
        return BadRequest(f"{field} has a percent-escape that is not UTF-8")


def _query_problem(query: bytes) -> BadRequest | None:
    for pair in query.split(b"&"):
        if not pair:
            continue
        raw_name, _, raw_value = pair.partition(b"=")
        name = _decoded(raw_name.replace(b"+", b" "), "a query parameter's name")
        if isinstance(name, BadRequest):
            return name
        field = f"query parameter {name!r}"
        value = _decoded(raw_value.replace(b"+", b" "), field)
        if isinstance(value, BadRequest):
            return value
        if problem := problem_in(name, "a query parameter's name") or problem_in(value, field):
            return problem
    return None


def url_problem(scope: Any) -> BadRequest | None:
    """The 400 for a request whose query string or path parameters break the rule, else None. Called after
    routing, so a path parameter is named as its route declares it."""
    query: bytes = scope.get("query_string", b"")
    # The path as sent; a server that gives none (a test client's may not) has its parameters checked anyway.
    raw_path: bytes | None = scope.get("raw_path")
    # The common case, an /ask or a cached answer's: nothing to decode, so nothing to look at.
    if not query and raw_path is not None and b"%" not in raw_path:
        return None
    params = scope.get("path_params") or {}
    try:
        unquote_to_bytes(raw_path or b"").decode("utf-8")
    except UnicodeDecodeError:
        # The server decoded the path with replacement characters (U+FFFD) where the bytes were not UTF-8:
        # the parameter holding one is the one the client sent broken.
        broken = next((name for name, value in params.items() if "\ufffd" in str(value)), None)
        where = f"path parameter {broken!r}" if broken else "the path"
        return BadRequest(f"{where} has a percent-escape that is not UTF-8")
    for name, value in params.items():
        if isinstance(value, str) and (problem := problem_in(value, f"path parameter {name!r}")):
            return problem
    return _query_problem(query) if query else None


def _field(at: tuple[str | int, ...]) -> str:
    """A body field's path as a client wrote it: `note`, `items[2].name`; cut short past 80 characters."""
    where = "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in at).removeprefix(".")
    return where if len(where) <= 80 else where[:79] + "…"


def _body_problem(body: Any, not_utf8: bool = False) -> BadRequest | None:
    """A string in a decoded JSON body (keys included) that breaks the rule, named by its path. A walk with its
    own stack, not recursion: msgspec decodes nesting deeper than a recursive walk could follow. Paths are
    written only for a string that breaks the rule, as this runs on every /ask."""
    search = _FORBIDDEN.search
    stack: list[tuple[tuple[str | int, ...], Any]] = [((), body)]
    while stack:
        at, value = stack.pop()
        if isinstance(value, str):
            if search(value):
                field = f"body field {_field(at)!r}" if at else "the request body"
                return problem_in(value, field, not_utf8=not_utf8)
            continue
        pairs = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
        for key, item in pairs:
            if isinstance(key, str) and search(key):
                return problem_in(key, f"a body field's name ({_field((*at, key))!r})", not_utf8=not_utf8)
            # A string is pushed only when it breaks the rule, to be named; objects and arrays to be walked.
            if isinstance(item, (dict, list)) or (isinstance(item, str) and search(item)):
                stack.append(((*at, key), item))
    return None


def _lenient_problem(body: bytes) -> BadRequest | None:
    try:
        body.decode("utf-8")
        not_utf8 = False
    except UnicodeDecodeError:
        not_utf8 = True
    try:
        lenient = json.loads(body.decode("utf-8", "surrogateescape"), strict=False)
    except (ValueError, RecursionError):
        return None
    return _body_problem(lenient, not_utf8=not_utf8)


class CheckedRequest(Request[Any, Any, Any]):
    """The app's request class: a JSON body's strings are checked as it is decoded, before any handler's
    types see it, so every endpoint that takes JSON is covered by being one."""

    async def json(self) -> Any:
        try:
            value = await super().json()
        except RecursionError:
            # msgspec stops at about a thousand levels; Litestar lets its RecursionError through as a 500.
            raise BadRequest("the request body nests arrays or objects too deeply") from None
        except SerializationException as not_json:
            # msgspec refuses a lone surrogate escape, a raw control character and bytes that are not UTF-8 as
            # "malformed JSON" without saying where; the standard library reads all three (strict=False,
            # surrogateescape), so the field that holds one can be named. Anything else stays "not JSON".
            if problem := _lenient_problem(await self.body()):
                raise problem from None
            raise not_json
        if problem := _body_problem(value):
            raise problem
        return value


def _strings(schema: Schema | Reference | None) -> list[Schema]:
    """The string schemas a parameter's or a property's schema allows (itself, or its oneOf/anyOf branches)."""
    if not isinstance(schema, Schema):
        return []
    branches = [*(schema.one_of or []), *(schema.any_of or [])]
    if branches:
        found = [s for branch in branches for s in _strings(branch)]
        # Litestar writes a bound of `str | None` beside the oneOf, not in its string branch.
        return found if schema.pattern is None else [schema]
    kinds = schema.type if isinstance(schema.type, list) else [schema.type]
    return [schema] if OpenAPIType.STRING in kinds and not schema.enum else []


def _declare(schema: Schema, where: str) -> None:
    if schema.const is not None:
        return
    if schema.pattern is None:
        schema.pattern = TEXT_PATTERN
        return
    # A field's own pattern must be as strict: else the document would promise what the guard refuses.
    own = re.compile(schema.pattern)
    admitted = [c for c in ("\x00", "\x07", "\x1b", "\x7f", "\x85") if own.search(f"a{c}b") or own.search(c)]
    if admitted:
        raise RuntimeError(f"{where}: its pattern {schema.pattern!r} admits {admitted!r}, which every request refuses")


def _body_schemas(openapi: OpenAPI) -> dict[str, Schema]:
    """The request bodies' component schemas, and those they refer to: what a client sends, not what it reads."""
    components = openapi.components.schemas or {}
    found: dict[str, Schema] = {}

    def visit(node: object) -> None:
        if isinstance(node, Reference):
            name = node.ref.rsplit("/", 1)[-1]
            if name not in found and name in components:
                found[name] = components[name]
                visit(components[name])
        elif isinstance(node, Schema):
            for child in (*(node.one_of or []), *(node.any_of or []), *(node.all_of or [])):
                visit(child)
            for child in (node.properties or {}).values():
                visit(child)
            visit(node.items)

    for item in (openapi.paths or {}).values():
        for operation in (item.post, item.put, item.patch):
            if operation is not None and isinstance(operation.request_body, RequestBody):
                for media in operation.request_body.content.values():
                    visit(media.schema)
    return found


_ENVELOPE = "#/components/schemas/ErrorEnvelope"


def _refused(operation: Operation) -> None:
    """Declare the 400 the rule answers with, in our envelope: Litestar's own 400 schema, which it writes for an
    operation with parameters, is not what leaves the service (provenance.http.exceptions)."""
    responses = operation.responses if operation.responses is not None else {}
    current = responses.get("400")
    if isinstance(current, OpenAPIResponse) and any(
        isinstance(media.schema, Reference) and media.schema.ref == _ENVELOPE
        for media in (current.content or {}).values()
    ):
        return
    responses["400"] = OpenAPIResponse(
        description="a parameter or a body field that breaks its rule, or holds a control character or bytes that "
        "are not UTF-8: an error, as {error: {code, message}}, naming it",
        content={"application/json": OpenAPIMediaType(schema=Reference(ref=_ENVELOPE))},
    )
    operation.responses = responses


def declare_string_rule(openapi: OpenAPI) -> None:
    """Write the rule into the OpenAPI document: every string parameter, and every string a request body holds,
    gets TEXT_PATTERN unless it declares a stricter pattern of its own (checked here: one that admits a control
    character stops start-up), and every operation that takes either declares the 400. Endpoints and fields
    added later are covered as they are declared."""
    for path, item in (openapi.paths or {}).items():
        for method in ("get", "put", "post", "delete", "patch"):
            operation: Operation | None = getattr(item, method, None)
            if operation is None:
                continue
            if operation.parameters or operation.request_body:
                _refused(operation)
            for parameter in operation.parameters or []:
                if isinstance(parameter, Parameter):
                    for schema in _strings(parameter.schema):
                        _declare(schema, f"{method.upper()} {path} {parameter.name}")
    for name, component in _body_schemas(openapi).items():
        for field, prop in (component.properties or {}).items():
            for schema in _strings(prop):
                _declare(schema, f"{name}.{field}")
