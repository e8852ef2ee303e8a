"""Error messages in our words: what a client reads names its mistake, never the framework's internals
("(field 'data')", "no file or directory match the path", "Expected `str`, got `int`")."""

from __future__ import annotations

import httpx
import pytest

from tests.conftest import LiveServer

FRAMEWORK_WORDS = ("field 'data'", "no file or directory", "Expected `", "Object ", "Not Found", "Method Not Allowed")


def _message(r: httpx.Response, status: int) -> str:
    assert r.status_code == status, r.text
    message: str = r.json()["error"]["message"]
    for words in FRAMEWORK_WORDS:
        assert words not in message, message
    return message


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (b'{"question": 42}', "question must be a string, not a number"),
        (b'{"question": "hi", "turnstileToken": 7}', "turnstileToken must be a string or null, not a number"),
        (b"{}", 'the request body needs a "question" field'),
        (b"[]", 'the request body must be a JSON object such as {"question": "..."}, not an array'),
        (b"null", 'the request body must be a JSON object such as {"question": "..."}, not null'),
        (b'{"question": ', "the request body is not valid JSON"),
        (b"\xff\xfe{}", "the request body is not valid JSON"),
        (
            b'{"question": "hi", "turnstile_token": "x"}',
            'the request body has a field this endpoint does not take: "turnstile_token" '
            '(did you mean "turnstileToken"? field names are camelCase)',
        ),
    ],
)
def test_bad_ask_bodies_are_explained(live_server: LiveServer, body: bytes, expected: str) -> None:
    r = httpx.post(f"{live_server.url}/ask", content=body, headers={"content-type": "application/json"})
    assert _message(r, 400) == expected


def test_an_unknown_path_is_named(live_server: LiveServer) -> None:
    for path in ("/nope", "/nope/deeper.js"):
        r = httpx.get(f"{live_server.url}{path}")
        assert _message(r, 404) == f"there is no page, file or endpoint at {path}"
        assert r.json()["error"]["code"] == "not_found"


def test_a_wrong_method_says_which_one_is_right(live_server: LiveServer) -> None:
    assert _message(httpx.get(f"{live_server.url}/ask"), 405) == "/ask takes POST, not GET"
    assert _message(httpx.delete(f"{live_server.url}/config"), 405) == "/config takes GET, not DELETE"


def test_a_body_over_the_limit_says_the_limit(live_server: LiveServer) -> None:
    big = b'{"question": "' + b"x" * 70_000 + b'"}'
    r = httpx.post(f"{live_server.url}/ask", content=big, headers={"content-type": "application/json"})
    assert _message(r, 413) == "the request body is too large; the limit is 64 KiB"
