"""Documents through the API against a real Postgres and the real app with its in-process ingest worker: an
upload's good files go in and are answerable, a bad one is named with its reason, the same bytes twice are
`unchanged`, the request's own limits are 413, and who may upload is the access rules'."""

from __future__ import annotations

import itertools
import json
import time
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import httpx
import pytest

from provenance.access.store import AccessStore
from provenance.guards.apikeys import create_key
from tests.conftest import LiveServer, make_settings
from tests.reliability.support import serving_keys

POLICY = b"# Travel policy\n\n## Per diem\n\nThe per diem for meals is $64 a day in every city.\n"
LEAVE = b"# Leave\n\n## Parental leave\n\nParents get twelve weeks of paid parental leave.\n"


@pytest.fixture(scope="module")
def uploads(pg_dsn: str, data_dir: Path) -> Iterator[tuple[LiveServer, dict[str, dict[str, str]]]]:
    settings = make_settings(pg_dsn, data_dir, rate_limit_per_hour=0, cache_ttl_s=0, upload_max_files=3)

    async def keys(pool: asyncpg.Pool) -> dict[str, str | None]:
        access = AccessStore(pool)
        return {
            "admin": await create_key(access, "root", "admin"),
            "editor": await create_key(access, "docs-team", "editor", ["handbook"]),
            "reader": await create_key(access, "handbook-reader", "reader", ["handbook"]),
            "stranger": await create_key(access, "stranger", "editor", ["other"]),
        }

    with serving_keys(pg_dsn, settings, keys) as (server, headers):
        yield server, headers


def wait_for(server: LiveServer, job_id: str, headers: dict[str, str]) -> dict:  # type: ignore[type-arg]
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        job = httpx.get(f"{server.url}/jobs/{job_id}", headers=headers).json()
        if job["state"] in ("done", "failed"):
            return job  # type: ignore[no-any-return]
        time.sleep(0.5)
    raise AssertionError(f"job {job_id} did not finish")


def test_an_upload_goes_in_document_by_document_and_is_answerable(
    uploads: tuple[LiveServer, dict[str, dict[str, str]]],
) -> None:
    server, h = uploads
    url = server.url
    made = httpx.post(f"{url}/corpora", json={"name": "handbook", "visibility": "private"}, headers=h["admin"])
    assert made.status_code == 201
    odd_name = "../../etc/pass\x01wd " + "x" * 280 + ".md"
    files = [
        ("files", ("policy.md", POLICY, "text/markdown")),
        ("files", ("scan.pdf", b"PK\x03\x04 a zip, not a PDF", "application/pdf")),
        ("files", (odd_name, LEAVE, "text/markdown")),
    ]
    accepted = httpx.post(f"{url}/corpora/handbook/documents", files=files, headers=h["editor"], timeout=60)
    assert accepted.status_code == 202, accepted.text
    job = wait_for(server, accepted.json()["jobId"], h["editor"])
    assert job["state"] == "done", job
    outcomes = {d["fileName"]: d for d in job["documents"]}
    assert outcomes["policy.md"]["status"] == "added"
    assert outcomes["scan.pdf"]["status"] == "failed" and "not a PDF" in outcomes["scan.pdf"]["reason"]
    assert [d["status"] for d in job["documents"]] == ["added", "failed", "added"], outcomes.keys()

    listed = httpx.get(f"{url}/corpora/handbook/documents", headers=h["reader"]).json()["documents"]
    names = sorted(d["fileName"] for d in listed)
    assert names[1] == "policy.md" and names[0].startswith("../../etc/pass") and names[0].endswith("….md")
    assert len(names[0]) == 300
    assert all(len(d["sha256"]) == 64 and d["bytes"] > 0 and d["passages"] >= 1 for d in listed)
    assert all(d["pages"] is None for d in listed)  # Markdown has none
    # The odd name is metadata: its passages live under the document's id, in one path component.
    files_held = [
        f["source"]
        for f in httpx.get(f"{url}/corpus", params={"name": "handbook"}, headers=h["reader"]).json()["files"]
    ]
    assert len(files_held) == 2 and all(s.count("/") == 1 and ".." not in s for s in files_held)

    asked = httpx.post(
        f"{url}/ask",
        json={"question": "What is the per diem for meals?", "corpus": "handbook"},
        headers=h["reader"],
        timeout=120,
    )
    assert asked.status_code == 200 and asked.json()["corpus"] == "handbook"
    assert (
        any(c["passageId"].endswith("policy.md#per-diem") for c in asked.json()["citations"])
        or asked.json()["status"] == "refused"
    )

    again = httpx.post(
        f"{url}/corpora/handbook/documents",
        files=[("files", ("copy.md", POLICY, "text/markdown"))],
        headers=h["editor"],
    )
    repeat = wait_for(server, again.json()["jobId"], h["editor"])
    assert [d["status"] for d in repeat["documents"]] == ["unchanged"]


def test_who_may_upload_and_what_the_request_may_hold(uploads: tuple[LiveServer, dict[str, dict[str, str]]]) -> None:
    server, h = uploads
    url = server.url
    httpx.post(f"{url}/corpora", json={"name": "handbook", "visibility": "private"}, headers=h["admin"])
    one = [("files", ("a.md", POLICY, "text/markdown"))]
    assert httpx.post(f"{url}/corpora/handbook/documents", files=one).status_code == 401
    assert httpx.post(f"{url}/corpora/handbook/documents", files=one, headers=h["reader"]).status_code == 403
    hidden = httpx.post(f"{url}/corpora/handbook/documents", files=one, headers=h["stranger"])
    assert hidden.status_code == 404 and hidden.json()["error"]["code"] == "unknown_corpus"
    assert httpx.get(f"{url}/corpora/handbook/documents", headers=h["stranger"]).status_code == 404
    four = [("files", (f"{n}.md", POLICY, "text/markdown")) for n in range(4)]
    too_many = httpx.post(f"{url}/corpora/handbook/documents", files=four, headers=h["editor"])
    assert too_many.status_code == 413 and "UPLOAD_MAX_FILES" in too_many.json()["error"]["message"]
    empty = httpx.post(f"{url}/corpora/handbook/documents", data={"other": "x"}, headers=h["editor"])
    assert empty.status_code == 400
    accepted = httpx.post(
        f"{url}/corpora/handbook/documents", files=[("files", ("e.md", b"", "text/plain"))], headers=h["editor"]
    )
    assert accepted.status_code == 202
    job_id = accepted.json()["jobId"]
    assert httpx.get(f"{url}/jobs/{job_id}", headers=h["stranger"]).status_code == 404
    job = wait_for(server, job_id, h["editor"])
    assert job["documents"] == [{"fileName": "e.md", "status": "failed", "reason": "the file is empty"}]


RETIRED = b"# Retired policy\n\n## Mileage\n\nMileage is paid at 40 cents a mile for trips over 50 miles.\n"


def test_a_document_is_removed_as_a_job_by_an_editor_and_its_passages_go_with_it(
    uploads: tuple[LiveServer, dict[str, dict[str, str]]],
) -> None:
    server, h = uploads
    url = server.url
    httpx.post(f"{url}/corpora", json={"name": "handbook", "visibility": "private"}, headers=h["admin"])
    added = httpx.post(
        f"{url}/corpora/handbook/documents",
        files=[("files", ("retired.md", RETIRED, "text/markdown"))],
        headers=h["editor"],
    )
    job = wait_for(server, added.json()["jobId"], h["editor"])
    [outcome] = job["documents"]
    assert outcome["status"] == "added", job
    assert job["progress"]["documents"] >= 1 and job["progress"]["passages"] >= 1
    doc_id = outcome["id"]

    def sources() -> list[str]:
        corpus = httpx.get(f"{url}/corpus", params={"name": "handbook"}, headers=h["reader"]).json()
        return [f["source"] for f in corpus["files"]]

    assert f"{doc_id}/retired.md" in sources()
    path = f"{url}/corpora/handbook/documents/{doc_id}"
    assert httpx.delete(path).status_code == 401
    assert httpx.delete(path, headers=h["reader"]).status_code == 403
    hidden = httpx.delete(path, headers=h["stranger"])
    assert hidden.status_code == 404 and hidden.json()["error"]["code"] == "unknown_corpus"
    missing = httpx.delete(f"{url}/corpora/handbook/documents/{'0' * 12}", headers=h["editor"])
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "unknown_document"
    assert httpx.delete(f"{url}/corpora/handbook/documents/..%2Fx", headers=h["editor"]).status_code in (400, 404)

    removing = httpx.delete(path, headers=h["editor"])
    assert removing.status_code == 202
    done = wait_for(server, removing.json()["jobId"], h["editor"])
    assert done["state"] == "done" and done["kind"] == "remove"
    assert done["documents"] == [{"fileName": "retired.md", "status": "removed", "id": doc_id}]
    listed = httpx.get(f"{url}/corpora/handbook/documents", headers=h["editor"]).json()["documents"]
    assert doc_id not in {d["id"] for d in listed}
    assert f"{doc_id}/retired.md" not in sources() and sources(), "the other documents stay"
    assert httpx.delete(path, headers=h["editor"]).status_code == 404


def test_a_jobs_events_say_what_get_says_as_it_changes_and_end_when_it_is_done(
    uploads: tuple[LiveServer, dict[str, dict[str, str]]],
) -> None:
    server, h = uploads
    url = server.url
    httpx.post(f"{url}/corpora", json={"name": "handbook", "visibility": "private"}, headers=h["admin"])
    accepted = httpx.post(
        f"{url}/corpora/handbook/documents",
        files=[("files", ("events.md", RETIRED.replace(b"40", b"41"), "text/markdown"))],
        headers=h["editor"],
    )
    job_id = accepted.json()["jobId"]
    hidden = httpx.get(f"{url}/jobs/{job_id}/events", headers=h["stranger"])
    assert hidden.status_code == 404 and hidden.json()["error"]["code"] == "unknown_job"
    assert httpx.get(f"{url}/jobs/{job_id}/events").status_code == 401
    events: list[dict] = []  # type: ignore[type-arg]
    with httpx.stream("GET", f"{url}/jobs/{job_id}/events", headers=h["reader"], timeout=240) as stream:
        assert stream.status_code == 200
        assert stream.headers["content-type"].startswith("text/event-stream")
        kinds = []
        for line in stream.iter_lines():
            if line.startswith("event:"):
                kinds.append(line.partition(":")[2].strip())
            elif line.startswith("data:"):
                events.append(json.loads(line.partition(":")[2]))
    assert set(kinds) == {"job"} and len(events) == len(kinds) >= 1
    # Each event differs from the one before, and the stream ends with the finished job, as GET says it.
    assert all(a != b for a, b in itertools.pairwise(events))
    assert [e["state"] for e in events][-1] == "done"
    assert not any(e["state"] in ("done", "failed") for e in events[:-1])
    assert events[-1] == httpx.get(f"{url}/jobs/{job_id}", headers=h["reader"]).json()
    assert events[-1]["documents"][0]["status"] == "added"
