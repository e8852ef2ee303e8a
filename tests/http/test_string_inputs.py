"""Every string a request carries, fuzzed for bytes: each query and path parameter and each string of each
request body that the live OpenAPI document declares gets NUL, lone surrogates, percent-escapes and bytes
that are not UTF-8, control characters and 10 kB. Each is a 400 naming the field (10 kB: a 400 naming it
where the document bounds the field, else any 4xx), never a 500. The operations come from the document
itself, so an endpoint or a field added later is fuzzed as it lands."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import httpx
import pytest

from provenance.http.inputs import problem_in
from provenance.wire import QUESTION_PATTERN, TEXT_PATTERN
from tests.conftest import LiveServer


@dataclass(frozen=True)
class Bad:
    label: str
    in_url: str  # as it is written in a query string or a path, percent-escapes and all
    in_json: bytes  # as it is written in a JSON body, quotes included: raw bytes where JSON has no escape
    says: str  # what the 400's message says of it


BAD = [
    Bad("NUL", "a%00b", b'"a\\u0000b"', "a NUL character"),
    Bad("raw NUL", "a%00b", b'"a\x00b"', "a NUL character"),
    Bad("lone surrogate", "a%ED%A0%80b", b'"a\\ud800b"', "surrogate"),
    Bad("lone low surrogate", "%ED%B0%80", b'"\\udc00"', "surrogate"),
    Bad("byte 0xFF", "a%FFb", b'"a\xffb"', "UTF-8"),
    Bad("truncated sequence", "a%C3", b'"a\xc3"', "UTF-8"),
    Bad("overlong slash", "%C0%AF", b'"\xc0\xaf"', "UTF-8"),
    # What schemathesis found (issue 48): a valid 4-byte character, NUL, a C1 control and "&".
    Bad("schemathesis's finding", "8%F3%BE%9B%9D%00%C2%83%26", b'"8\xf3\xbe\x9b\x9d\\u0000\xc2\x83&"', "NUL"),
    Bad("BEL", "a%07b", b'"a\\u0007b"', "control character (U+0007)"),
    Bad("raw control", "%01", b'"a\x01b"', "control character (U+0001)"),
    Bad("terminal escape", "%1B%5B31mred", b'"\\u001b[31mred"', "control character (U+001B)"),
    Bad("DEL", "a%7F", b'"a\\u007f"', "control character (U+007F)"),
    Bad("C1 control", "a%C2%85b", b'"a\\u0085b"', "control character (U+0085)"),
]
TEN_KB = "x" * 10_000


@dataclass(frozen=True)
class Field:
    """One string input of one operation: a query or path parameter, or a string of a body variant."""

    method: str
    path: str
    where: str  # "query", "path" or "body"
    name: str
    schema: dict[str, Any]
    body: dict[str, Any] | None = None  # a body valid by the document, the field's own value aside

    def __str__(self) -> str:
        return f"{self.method} {self.path} {self.where}:{self.name}"


def _resolve(document: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in node:
        target: Any = document
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        node = target
    return node


def _is_string(document: dict[str, Any], schema: dict[str, Any]) -> bool:
    schema = _resolve(document, schema)
    branches = schema.get("oneOf") or schema.get("anyOf")
    if branches:
        return any(_is_string(document, b) for b in branches)
    kinds = schema.get("type")
    return "string" in (kinds if isinstance(kinds, list) else [kinds]) or "const" in schema


def _valid(document: dict[str, Any], schema: dict[str, Any]) -> Any:
    """The simplest value the document accepts for a required field."""
    schema = _resolve(document, schema)
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return next(v for v in schema["enum"] if v is not None)
    # Fits every string rule the document has: a corpus name's, a request id's, a question's.
    return "abc12345"


def _body_variants(document: dict[str, Any], schema: dict[str, Any]) -> Iterator[dict[str, Any]]:
    schema = _resolve(document, schema)
    if "oneOf" in schema or "anyOf" in schema:
        for branch in schema.get("oneOf") or schema["anyOf"]:
            yield from _body_variants(document, branch)
    elif schema.get("type") == "object":
        yield schema


def fields(document: dict[str, Any]) -> list[Field]:
    found: list[Field] = []
    for path, item in document["paths"].items():
        for method, operation in item.items():
            for parameter in operation.get("parameters", []):
                parameter = _resolve(document, parameter)
                if parameter["in"] in ("query", "path") and _is_string(document, parameter["schema"]):
                    found.append(Field(method.upper(), path, parameter["in"], parameter["name"], parameter["schema"]))
            content = operation.get("requestBody", {}).get("content", {})
            for variant in _body_variants(document, content.get("application/json", {}).get("schema", {})):
                required = {
                    name: _valid(document, prop)
                    for name, prop in variant["properties"].items()
                    if name in variant.get("required", [])
                }
                for name, prop in variant["properties"].items():
                    if _is_string(document, prop):
                        found.append(Field(method.upper(), path, "body", name, _resolve(document, prop), required))
    return found


def _send(client: httpx.Client, document: dict[str, Any], field: Field, url_value: str, json_value: bytes) -> Any:
    path, query = field.path, ""
    for parameter in document["paths"][field.path][field.method.lower()].get("parameters", []):
        parameter = _resolve(document, parameter)
        if parameter["in"] == "path":
            value = url_value if parameter["name"] == field.name else "abc12345"
            path = path.replace("{" + parameter["name"] + "}", value)
    if field.where == "query":
        query = f"?{field.name}={url_value}"
    if field.where != "body":
        return client.request(field.method, path + query)
    placeholder = "\x1a-the-field-\x1a"
    base = json.dumps({**(field.body or {}), field.name: placeholder}).encode()
    raw = base.replace(json.dumps(placeholder).encode(), json_value)
    return client.request(field.method, path, content=raw, headers={"content-type": "application/json"})


@pytest.fixture(scope="module")
def document(live_server: LiveServer) -> dict[str, Any]:
    found: dict[str, Any] = httpx.get(f"{live_server.url}/schema/openapi.json").json()
    return found


def test_the_document_has_every_kind_of_string_input(document: dict[str, Any]) -> None:
    # So that an enumeration that found nothing can't pass for a clean one.
    kinds = {(f.where, f.name) for f in fields(document)}
    assert {("query", "name"), ("query", "corpus"), ("path", "passage_id")} <= kinds
    assert {("body", "question"), ("body", "turnstileToken"), ("body", "note"), ("body", "requestId")} <= kinds


def test_every_string_input_refuses_bad_bytes_with_a_400_naming_it(
    live_server: LiveServer, document: dict[str, Any]
) -> None:
    failures: list[str] = []
    statuses: list[int] = []
    with httpx.Client(base_url=live_server.url, timeout=30) as client:
        for field in fields(document):
            for bad in BAD:
                r = _send(client, document, field, bad.in_url, bad.in_json)
                statuses.append(r.status_code)
                is_json = r.headers.get("content-type", "").startswith("application/json")
                error = r.json().get("error", {}) if is_json else {}
                message = error.get("message", "")
                if r.status_code != 400 or f"'{field.name}'" not in message or error.get("code") != "bad_request":
                    failures.append(f"{field} {bad.label}: {r.status_code} {r.text[:200]}")
                elif bad.says not in message and not (field.where != "body" and "UTF-8" in message):
                    # A query string can't carry a lone surrogate but as bytes that are not UTF-8: either says so.
                    failures.append(f"{field} {bad.label}: {message!r} does not say {bad.says!r}")
    # The figures for docs/reliability.md.
    operations = len({(f.method, f.path) for f in fields(document)})
    print(
        f"\nbyte fuzz: {len(fields(document))} string inputs of {operations} operations, {len(BAD)} values each:"
        f" {len(statuses)} requests, {sum(s >= 500 for s in statuses)} 5xx, {len(failures)} failures"
    )
    assert not failures, "\n".join(failures)


def test_ten_kilobytes_is_a_400_where_the_document_bounds_the_field_and_never_a_5xx(
    live_server: LiveServer, document: dict[str, Any]
) -> None:
    failures: list[str] = []
    with httpx.Client(base_url=live_server.url, timeout=30) as client:
        for field in fields(document):
            r = _send(client, document, field, TEN_KB, json.dumps(TEN_KB).encode())
            bounded = any(key in field.schema for key in ("maxLength", "const", "enum")) or (
                # A field whose pattern 10 kB of "x" can't match (a corpus name's).
                "pattern" in field.schema and re.search(field.schema["pattern"], TEN_KB) is None
            )
            if r.status_code >= 500 or not r.headers["content-type"].startswith("application/json"):
                failures.append(f"{field}: {r.status_code} {r.text[:200]}")
            elif bounded and (r.status_code != 400 or field.name not in r.json()["error"]["message"]):
                failures.append(f"{field} is bounded, yet: {r.status_code} {r.text[:200]}")
            elif not bounded and r.status_code not in (400, 404):
                failures.append(f"{field} is unbounded, yet: {r.status_code} {r.text[:200]}")
    assert not failures, "\n".join(failures)


def test_schemathesis_finding_is_a_400_naming_the_parameter(live_server: LiveServer) -> None:
    r = httpx.get(f"{live_server.url}/corpus?name=8%F3%BE%9B%9D%00%C2%83%26")
    assert r.status_code == 400, r.text
    assert r.json()["error"] == {"code": "bad_request", "message": "query parameter 'name' contains a NUL character"}


def test_tab_line_feed_and_carriage_return_are_text(live_server: LiveServer) -> None:
    question = "What are\tthe opening\r\nhours?"
    r = httpx.post(f"{live_server.url}/ask", json={"question": question}, timeout=120)
    assert r.status_code == 200, r.text
    assert r.json()["question"] == question.strip()


def test_the_guard_and_the_documents_pattern_agree_on_every_character() -> None:
    """The document's TEXT_PATTERN admits exactly what the guard lets through (surrogates aside, which no
    valid request holds and an ECMA-262 pattern can't name), so a request valid by the schema is never
    refused for its characters, and one the guard refuses is invalid by the schema."""
    text = re.compile(TEXT_PATTERN)
    question = re.compile(QUESTION_PATTERN)
    disagree = []
    for code in [*range(0x3000), 0xFEFF, 0xFFFD, 0xFFFF, 0x1F600, 0x10FFFF]:
        char = chr(code)
        refused = problem_in(f"a{char}b", "f") is not None
        if refused == bool(text.search(f"a{char}b")) or refused == bool(question.search(f"a{char}b")):
            disagree.append(hex(code))
    assert not disagree, disagree
    assert problem_in("a\ud800b", "f") is not None and problem_in("\udfff", "f") is not None
