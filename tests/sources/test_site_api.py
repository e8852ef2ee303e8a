"""POST /corpora/{name}/sources against a real Postgres and the real app: who may add a site to which corpus
(every path the rule guards), bad input as a 400, and the route in the OpenAPI document."""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import httpx
import pytest

from provenance.access.store import AccessStore
from provenance.guards.apikeys import create_key
from provenance.inference.embedder import Embedder
from provenance.ingest.folder import ingest
from provenance.store.corpora import CorpusStore
from tests.conftest import make_settings
from tests.reliability.support import serving_keys

# Loopback, refused by the crawler with SOURCES_ALLOW_PRIVATE off: the queued syncs end at once, fetching nothing.
SITE = "http://127.0.0.1:9/handbook/"


@pytest.fixture(scope="module")
def api(pg_dsn: str, data_dir: Path, embedder: Embedder) -> Iterator[tuple[str, dict[str, dict[str, str]]]]:
    settings = make_settings(pg_dsn, data_dir, rate_limit_per_hour=0, cache_ttl_s=0)

    async def keys(pool: asyncpg.Pool) -> dict[str, str | None]:
        access = AccessStore(pool)
        await access.create_corpus("handbook", "private", "", exists=False)
        folder = Path(tempfile.mkdtemp()) / "notes"
        folder.mkdir()
        (folder / "leave.md").write_text("# Leave\n\n## Parental leave\n\nParents get twelve weeks of leave.\n")
        await ingest(CorpusStore(pool), folder, lambda: embedder, settings.embedding.model, corpus="notes")
        return {
            "admin": await create_key(access, "root", "admin"),
            "editor": await create_key(access, "docs-team", "editor", ["handbook"]),
            "reader": await create_key(access, "handbook-reader", "reader", ["handbook"]),
            "stranger": await create_key(access, "stranger", "editor", ["other"]),
        }

    with serving_keys(pg_dsn, settings, keys) as (server, headers):
        yield server.url, headers


def test_an_editor_adds_a_site_to_its_corpus_and_its_first_sync_is_queued(
    api: tuple[str, dict[str, dict[str, str]]],
) -> None:
    url, h = api
    added = httpx.post(
        f"{url}/corpora/handbook/sources", json={"url": SITE, "maxPages": 50, "every": "24h"}, headers=h["editor"]
    )
    assert added.status_code == 202, added.text
    body = added.json()
    assert body["url"] == SITE and body["options"] == {"maxPages": 50, "everyS": 86400}
    job = httpx.get(f"{url}/jobs/{body['jobId']}", headers=h["editor"]).json()
    assert job["kind"] == "sync" and job["corpus"] == "handbook"


def test_a_reader_is_refused_403_and_a_key_that_cannot_read_the_corpus_gets_its_404(
    api: tuple[str, dict[str, dict[str, str]]],
) -> None:
    url, h = api
    reader = httpx.post(f"{url}/corpora/handbook/sources", json={"url": SITE}, headers=h["reader"])
    assert (reader.status_code, reader.json()["error"]["code"]) == (403, "forbidden")
    stranger = httpx.post(f"{url}/corpora/handbook/sources", json={"url": SITE}, headers=h["stranger"])
    assert (stranger.status_code, stranger.json()["error"]["code"]) == (404, "unknown_corpus")
    missing = httpx.post(f"{url}/corpora/nowhere/sources", json={"url": SITE}, headers=h["editor"])
    assert (missing.status_code, missing.json()["error"]["code"]) == (404, "unknown_corpus")
    nobody = httpx.post(f"{url}/corpora/handbook/sources", json={"url": SITE})
    assert nobody.status_code == 401


def test_an_admin_naming_a_new_corpus_makes_it_public(api: tuple[str, dict[str, dict[str, str]]]) -> None:
    url, h = api
    added = httpx.post(f"{url}/corpora/guides/sources", json={"url": SITE}, headers=h["admin"])
    assert added.status_code == 202, added.text
    again = httpx.post(f"{url}/corpora/guides/sources", json={"url": SITE}, headers=h["reader"])
    assert again.status_code == 403  # public: a reader sees it, and may not change it


def test_a_corpus_ingested_from_a_folder_takes_no_site(api: tuple[str, dict[str, dict[str, str]]]) -> None:
    """A sync rebuilds its corpus from the corpus's documents, and a folder's are none: its passages would go."""
    url, h = api
    refused = httpx.post(f"{url}/corpora/notes/sources", json={"url": SITE}, headers=h["admin"])
    assert (refused.status_code, refused.json()["error"]["code"]) == (409, "folder_corpus")


@pytest.mark.parametrize(
    "body",
    [
        {"url": "ftp://example.org/"},
        {"url": SITE, "prefix": "docs"},
        {"url": SITE, "maxPages": 0},
        {"url": SITE, "every": "tomorrow"},
        {"url": SITE, "every": "1m"},
        {"url": SITE, "depth": 3},
        {},
    ],
)
def test_bad_input_is_a_400_with_its_reason(
    api: tuple[str, dict[str, dict[str, str]]], body: dict[str, object]
) -> None:
    url, h = api
    refused = httpx.post(f"{url}/corpora/handbook/sources", json=body, headers=h["editor"])
    assert refused.status_code == 400, refused.text
    assert refused.json()["error"]["message"]


def test_the_route_is_declared_in_the_openapi_document(api: tuple[str, dict[str, dict[str, str]]]) -> None:
    url, _ = api
    doc = httpx.get(f"{url}/schema/openapi.json").json()
    declared = doc["paths"]["/corpora/{name}/sources"]["post"]
    assert {"202", "400", "401", "403", "404"} <= set(declared["responses"])
