"""Private corpora over HTTP, against a real Postgres and the real app: what each client sees and may do on
every path that reads a corpus, with a key of every role, a revoked key and no key at all (the page).

A corpus a client may not read must be indistinguishable from one that does not exist: the same 404
`unknown_corpus`, in the same words, naming only corpora the client can see."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
import pytest_asyncio

from provenance.access.store import AccessStore
from provenance.guards.apikeys import create_key
from provenance.inference.embedder import Embedder
from provenance.ingest.folder import ingest
from provenance.services import Services
from provenance.settings import Settings
from provenance.store import Store
from provenance.store.guards import GuardStore
from provenance.store.pool import create_pool
from tests.conftest import LiveServer
from tests.ingest.test_corpora import write_garden
from tests.reliability.support import corpus_copy, drop_schema

PUBLIC = {"default", "garden"}
PRIVATE = {"hr", "ops"}
SSE = {"Accept": "text/event-stream"}
QUESTION = "How much is a half plot per year?"
PASSAGE = "plots.md%23plot-rent"

# client -> the corpora it can see
SEES = {
    "page": PUBLIC,
    "reader": PUBLIC,
    "hr-reader": PUBLIC | {"hr"},
    "hr-editor": PUBLIC | {"hr"},
    "ops-editor": PUBLIC | {"ops"},
    "admin": PUBLIC | PRIVATE,
}


@dataclass
class Setup:
    settings: Settings
    headers: dict[str, dict[str, str]]  # client -> its request headers
    revoked: dict[str, str]


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def setup(
    pg_dsn: str, data_dir: Path, embedder: Embedder, tmp_path_factory: pytest.TempPathFactory, corpus_services: Services
) -> AsyncIterator[Setup]:
    """The session's corpus as "default", a public "garden" and two private corpora, "hr" and "ops" (the
    garden's few documents in each), and a key of every kind."""
    settings = await corpus_copy(
        pg_dsn, data_dir, rate_limit_per_hour=0, feedback_rate_limit_per_hour=0, cache_ttl_s=3600
    )
    pool = await create_pool(pg_dsn, settings)
    try:
        store, access = Store(pool), AccessStore(pool)
        garden = write_garden(tmp_path_factory.mktemp("garden"))
        for name in ("hr", "ops"):
            assert await access.create_corpus(name, "private", f"{name.upper()} handbook", exists=False)
        for name in ("garden", "hr", "ops"):
            await ingest(store, garden, lambda: embedder, embedder.model_name, corpus=name)
        made = {
            "reader": await create_key(access, "plain-reader"),
            "hr-reader": await create_key(access, "hr-reader", "reader", ["hr"]),
            "hr-editor": await create_key(access, "hr-editor", "editor", ["hr"]),
            "ops-editor": await create_key(access, "ops-editor", "editor", ["ops"]),
            "admin": await create_key(access, "root", "admin"),
            "revoked": await create_key(access, "gone", "admin"),
        }
        assert await GuardStore(pool).revoke_api_key("gone")
    finally:
        await pool.close()
    headers = {who: {"Authorization": f"Bearer {key}"} for who, key in made.items() if who != "revoked"}
    headers["page"] = {}
    yield Setup(settings, headers, {"Authorization": f"Bearer {made['revoked']}"})
    await drop_schema(pg_dsn, settings.database.schema)


@pytest.fixture(scope="module")
def server(setup: Setup) -> Iterator[LiveServer]:
    with LiveServer(setup.settings) as live:
        yield live


def unknown(name: str, who: str) -> dict[str, str]:
    seen = ", ".join(repr(n) for n in sorted(SEES[who]))
    return {"code": "unknown_corpus", "message": f"there is no corpus named {name!r}; the corpora are: {seen}"}


def ask(server: LiveServer, headers: dict[str, str], corpus: str | None, question: str = QUESTION) -> httpx.Response:
    body = {"question": question} if corpus is None else {"question": question, "corpus": corpus}
    return httpx.post(f"{server.url}/ask", json=body, headers=headers, timeout=120)


def test_each_client_lists_only_the_corpora_it_may_read(server: LiveServer, setup: Setup) -> None:
    for who, headers in setup.headers.items():
        listed = httpx.get(f"{server.url}/corpora", headers=headers).json()
        assert {c["name"] for c in listed["corpora"]} == SEES[who], who
        assert listed["default"] == "default"
        assert {c["name"] for c in listed["corpora"] if c["private"]} == SEES[who] & PRIVATE
    titles = {
        c["name"]: c["title"]
        for c in httpx.get(f"{server.url}/corpora", headers=setup.headers["admin"]).json()["corpora"]
    }
    assert titles["hr"] == "HR handbook"


def test_a_private_corpus_is_unknown_on_every_path_to_a_client_that_may_not_read_it(
    server: LiveServer, setup: Setup
) -> None:
    for who, headers in setup.headers.items():
        for corpus in [*sorted(PRIVATE - SEES[who]), "nowhere"]:
            expected = unknown(corpus, who)
            paths = {
                "ask": ask(server, headers, corpus),
                "ask stream": httpx.post(
                    f"{server.url}/ask", json={"question": QUESTION, "corpus": corpus}, headers=headers | SSE
                ),
                "corpus": httpx.get(f"{server.url}/corpus", params={"name": corpus}, headers=headers),
                "passage": httpx.get(f"{server.url}/passages/{PASSAGE}", params={"corpus": corpus}, headers=headers),
            }
            for path, response in paths.items():
                assert response.status_code == 404, (who, corpus, path)
                assert response.json() == {"error": expected}, (who, corpus, path)


def test_a_client_granted_a_private_corpus_reads_it_on_every_path(server: LiveServer, setup: Setup) -> None:
    for who, headers in setup.headers.items():
        for corpus in sorted(SEES[who] & PRIVATE):
            asked = ask(server, headers, corpus)
            assert asked.status_code == 200 and asked.json()["corpus"] == corpus, who
            one = httpx.get(f"{server.url}/corpus", params={"name": corpus}, headers=headers)
            assert one.status_code == 200 and one.json()["name"] == corpus
            passage = httpx.get(f"{server.url}/passages/{PASSAGE}", params={"corpus": corpus}, headers=headers)
            assert passage.status_code == 200 and "$40" in passage.json()["text"]


def test_a_cached_answer_is_never_served_to_a_client_that_may_not_read_its_corpus(
    server: LiveServer, setup: Setup
) -> None:
    question = "When does the tool shed open?"
    first = ask(server, setup.headers["admin"], "hr", question)
    assert first.status_code == 200 and first.json()["status"] != "blocked"
    again = ask(server, setup.headers["admin"], "hr", question)
    assert again.json()["cached"] is True  # the answer is in the cache
    for who in ("page", "reader", "ops-editor"):
        refused = ask(server, setup.headers[who], "hr", question)
        assert refused.status_code == 404 and refused.json() == {"error": unknown("hr", who)}
        streamed = httpx.post(
            f"{server.url}/ask", json={"question": question, "corpus": "hr"}, headers=setup.headers[who] | SSE
        )
        assert streamed.status_code == 404 and streamed.json() == {"error": unknown("hr", who)}
    # Another client that may read it shares the cached answer.
    shared = ask(server, setup.headers["hr-reader"], "hr", question)
    assert shared.status_code == 200 and shared.json()["cached"] is True


def test_feedback_on_a_private_corpus_answer_is_unknown_to_a_client_that_may_not_read_it(
    server: LiveServer, setup: Setup
) -> None:
    answered = ask(server, setup.headers["admin"], "hr", "Who changes the shed code?").json()
    assert answered["corpus"] == "hr" and answered["status"] in ("answered", "refused")
    verdict = {"requestId": answered["requestId"], "verdict": "right"}
    absent = {"requestId": "0" * 32, "verdict": "right"}
    for who in ("page", "reader", "ops-editor"):
        headers = setup.headers[who]
        refused = httpx.post(f"{server.url}/feedback", json=verdict, headers=headers)
        nothing = httpx.post(f"{server.url}/feedback", json=absent, headers=headers)
        assert refused.status_code == nothing.status_code == 404, who
        assert refused.json()["error"]["code"] == "unknown_request"
        assert refused.json()["error"]["message"].replace(answered["requestId"], "ID") == nothing.json()["error"][
            "message"
        ].replace("0" * 32, "ID")
    for who in ("hr-reader", "hr-editor", "admin"):
        rated = httpx.post(f"{server.url}/feedback", json=verdict, headers=setup.headers[who])
        assert rated.status_code == 200, who


def test_a_revoked_or_unknown_key_is_refused_everywhere_never_served_as_the_page(
    server: LiveServer, setup: Setup
) -> None:
    for headers in (setup.revoked, {"Authorization": "Bearer pv_not-a-key"}):
        responses = {
            "ask": ask(server, headers, "garden"),
            "ask default": ask(server, headers, None),
            "ask private": ask(server, headers, "hr"),
            "corpora": httpx.get(f"{server.url}/corpora", headers=headers),
            "corpus": httpx.get(f"{server.url}/corpus", params={"name": "garden"}, headers=headers),
            "passage": httpx.get(f"{server.url}/passages/{PASSAGE}", params={"corpus": "garden"}, headers=headers),
            "feedback": httpx.post(
                f"{server.url}/feedback", json={"requestId": "0" * 32, "verdict": "right"}, headers=headers
            ),
            "create corpus": httpx.post(
                f"{server.url}/corpora", json={"name": "legal", "visibility": "private"}, headers=headers
            ),
            "remove corpus": httpx.delete(f"{server.url}/corpora/hr", headers=headers),
        }
        for path, response in responses.items():
            assert response.status_code == 401, path
            # Nothing of a corpus: not its title, nor (for /ask, which echoes the name asked) its version.
            assert "HR handbook" not in response.text and response.json().get("corpusVersion") is None, path
            assert response.headers["WWW-Authenticate"].startswith("Bearer"), path


def test_healthz_names_no_private_corpus_and_counts_none_of_its_passages(server: LiveServer, setup: Setup) -> None:
    listed = httpx.get(f"{server.url}/corpora", headers=setup.headers["admin"]).json()["corpora"]
    sizes = {c["name"]: c["passageCount"] for c in listed}
    versions = {c["name"]: c["version"] for c in listed}
    health = httpx.get(f"{server.url}/healthz")
    assert health.status_code == 200
    assert health.json()["passages"] == sizes["default"] + sizes["garden"]
    assert health.json()["corpusVersion"] == versions["default"]
    assert all(name not in health.text for name in ('"hr"', '"ops"', versions["hr"], versions["ops"]))


def test_only_an_admin_key_creates_and_removes_corpora(server: LiveServer, setup: Setup) -> None:
    url, h = server.url, setup.headers
    new = {"name": "legal", "visibility": "private", "title": "Legal"}
    assert httpx.post(f"{url}/corpora", json=new).json()["error"]["code"] == "api_key_required"
    for who in ("reader", "hr-reader", "hr-editor", "ops-editor"):
        refused = httpx.post(f"{url}/corpora", json=new, headers=h[who])
        assert refused.status_code == 403 and refused.json()["error"]["code"] == "forbidden", who
    created = httpx.post(f"{url}/corpora", json=new, headers=h["admin"])
    assert created.status_code == 201 and created.json() == {"name": "legal", "visibility": "private", "title": "Legal"}
    assert httpx.post(f"{url}/corpora", json=new, headers=h["admin"]).status_code == 409
    taken = httpx.post(f"{url}/corpora", json={"name": "garden", "visibility": "private"}, headers=h["admin"])
    assert taken.status_code == 409  # a public corpus is never made private afterwards

    # Removing: a corpus the key can't see is unknown; one it can see but may not remove is forbidden.
    assert httpx.delete(f"{url}/corpora/legal").status_code == 401
    for who in ("reader", "hr-editor", "ops-editor"):
        hidden = httpx.delete(f"{url}/corpora/legal", headers=h[who])
        assert hidden.status_code == 404 and hidden.json() == {"error": unknown("legal", who)}, who
    assert httpx.delete(f"{url}/corpora/hr", headers=h["ops-editor"]).json() == {"error": unknown("hr", "ops-editor")}
    for who, corpus in (("hr-editor", "hr"), ("reader", "garden"), ("ops-editor", "ops")):
        forbidden = httpx.delete(f"{url}/corpora/{corpus}", headers=h[who])
        assert forbidden.status_code == 403 and forbidden.json()["error"]["code"] == "forbidden", who
    removed = httpx.delete(f"{url}/corpora/legal", headers=h["admin"])
    assert removed.status_code == 200 and removed.json()["name"] == "legal"
    assert httpx.delete(f"{url}/corpora/legal", headers=h["admin"]).status_code == 404
    assert httpx.delete(f"{url}/corpora/default", headers=h["admin"]).status_code == 409


def test_a_grant_taken_away_or_a_key_revoked_holds_from_the_next_request(server: LiveServer, setup: Setup) -> None:
    async def change(step: str) -> str | None:
        pool = await create_pool(setup.settings.database.url or "", setup.settings)
        try:
            access = AccessStore(pool)
            if step == "create":
                return await create_key(access, "temp", "reader", ["hr"])
            if step == "ungrant":
                assert await access.ungrant("temp", "hr")
            elif step == "grant":
                assert await access.grant("temp", "hr", "reader")
            else:
                assert await GuardStore(pool).revoke_api_key("temp")
            return None
        finally:
            await pool.close()

    key = asyncio.run(change("create"))
    headers = {"Authorization": f"Bearer {key}"}

    def status() -> int:
        return httpx.get(f"{server.url}/corpus", params={"name": "hr"}, headers=headers).status_code

    assert status() == 200
    asyncio.run(change("ungrant"))
    assert status() == 404
    asyncio.run(change("grant"))
    assert status() == 200
    asyncio.run(change("revoke"))
    assert status() == 401


def test_a_conversation_on_a_private_corpus_is_hidden_once_its_corpus_may_not_be_read(
    server: LiveServer, setup: Setup
) -> None:
    async def change(step: str) -> str | None:
        pool = await create_pool(setup.settings.database.url or "", setup.settings)
        try:
            access = AccessStore(pool)
            if step == "create":
                return await create_key(access, "talker", "reader", ["hr"])
            assert await access.ungrant("talker", "hr")
            return None
        finally:
            await pool.close()

    key = asyncio.run(change("create"))
    headers = {"Authorization": f"Bearer {key}"}
    first = ask(server, headers, "hr")
    assert first.status_code == 200, first.text
    conversation = first.json()["conversationId"]

    def read(who: dict[str, str]) -> httpx.Response:
        return httpx.get(f"{server.url}/conversations/{conversation}", headers=who, timeout=30)

    assert read(headers).status_code == 200
    # Another key, even one that may read the corpus, is not the conversation's owner.
    assert read(setup.headers["hr-editor"]).json()["error"]["code"] == "unknown_conversation"
    asyncio.run(change("ungrant"))
    hidden = read(headers)
    assert hidden.status_code == 404 and hidden.json()["error"]["code"] == "unknown_conversation", hidden.text
    follow_up = httpx.post(
        f"{server.url}/ask",
        json={"question": "And a full plot?", "conversationId": conversation},
        headers=headers,
        timeout=120,
    )
    assert follow_up.status_code == 404 and follow_up.json()["error"] == unknown("hr", "reader"), follow_up.text
