"""The HTTP surface: health, errors as JSON, request ids, corpus and passage endpoints."""

import httpx

from tests.conftest import LiveServer


def test_healthz_reports_database_and_corpus(live_server: LiveServer) -> None:
    r = httpx.get(f"{live_server.url}/healthz")
    assert r.status_code == 200
    body = r.json()
    assert body["database"] == "up" and body["passages"] > 20
    assert body["profile"] == "local" and body["version"]
    assert len(r.headers["x-request-id"]) >= 8
    name, duration = r.headers["server-timing"].split(";dur=")
    assert name == "app" and 0 < float(duration) < 10_000


def test_malformed_json_is_a_400_json_error_and_the_server_keeps_serving(live_server: LiveServer) -> None:
    r = httpx.post(f"{live_server.url}/ask", content=b'{"question": ', headers={"content-type": "application/json"})
    assert r.status_code == 400
    assert r.json()["error"]["code"] == "bad_request"
    assert httpx.get(f"{live_server.url}/healthz").status_code == 200


def test_question_validation(live_server: LiveServer) -> None:
    for body, fragment in [
        ({"question": "   "}, "empty"),
        ({"question": "x" * 501}, "limit"),
        ({"question": 42}, "str"),
        ({}, "question"),
    ]:
        r = httpx.post(f"{live_server.url}/ask", json=body)
        assert r.status_code == 400, body
        assert fragment in r.json()["error"]["message"], r.json()


def test_wrong_content_type_is_415(live_server: LiveServer) -> None:
    r = httpx.post(f"{live_server.url}/ask", content=b"question=hi", headers={"content-type": "text/plain"})
    assert r.status_code == 415
    assert r.json()["error"]["code"] == "unsupported_media_type"


def test_unknown_routes_are_json_404(live_server: LiveServer) -> None:
    r = httpx.get(f"{live_server.url}/nope/nothing")
    assert r.status_code == 404
    assert r.json()["error"]["code"] == "not_found"


def test_request_id_is_echoed(live_server: LiveServer) -> None:
    r = httpx.get(f"{live_server.url}/healthz", headers={"x-request-id": "abc123def456"})
    assert r.headers["x-request-id"] == "abc123def456"


def test_corpus_and_passage_endpoints(live_server: LiveServer) -> None:
    corpus = httpx.get(f"{live_server.url}/corpus").json()
    assert corpus["passageCount"] > 20 and len(corpus["files"]) == 8 and corpus["version"]
    pid = "05-storage-and-lockers.md#lockers"
    r = httpx.get(f"{live_server.url}/passages/{pid.replace('#', '%23')}")
    assert r.status_code == 200
    assert "$14" in r.json()["text"] and r.json()["tokenCount"] > 0
    # The wire shape, exactly: camelCase, nothing of the table's own (position, hash, corpus) leaks out.
    assert set(r.json()) == {"id", "source", "heading", "text", "tokenCount", "embeddingModel", "pages"}
    assert r.json()["pages"] is None  # pages are a PDF's (tests/ingest/test_ingest_documents.py)
    assert r.json()["id"] == pid and r.json()["heading"] == "Storage and Lockers > Lockers"
    missing = httpx.get(f"{live_server.url}/passages/nope.md%23none")
    assert missing.status_code == 404 and "nope.md#none" in missing.json()["error"]["message"]


def test_openapi_schema_is_served(live_server: LiveServer) -> None:
    r = httpx.get(f"{live_server.url}/schema/openapi.json")
    assert r.status_code == 200
    assert "/ask" in r.json()["paths"]
