"""GET /key against a real Postgres and the real app: the corpora a key may change, for a key of every role, a
revoked key and no key at all. It lists corpora made with POST /corpora before their first upload, and never a
private corpus to a key not granted it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import asyncpg
import httpx
import pytest

from provenance.access.store import AccessStore
from provenance.guards.apikeys import create_key
from provenance.store.guards import GuardStore
from tests.conftest import LiveServer, make_settings
from tests.reliability.support import serving_keys

Keys = dict[str, dict[str, str]]


@pytest.fixture(scope="module")
def keyed(pg_dsn: str, data_dir: Path) -> Iterator[tuple[LiveServer, Keys]]:
    """A public "faq", private "hr" and "ops" (made as POST /corpora makes them: recorded, no passage yet),
    and a key of every kind."""
    settings = make_settings(pg_dsn, data_dir, rate_limit_per_hour=0, cache_ttl_s=0, ingest_workers=0)

    async def prepare(pool: asyncpg.Pool) -> dict[str, str | None]:
        access = AccessStore(pool)
        assert await access.create_corpus("faq", "public", "Questions people ask", exists=False)
        assert await access.create_corpus("hr", "private", "", exists=False)
        assert await access.create_corpus("ops", "private", "Ops runbook", exists=False)
        made = {
            "admin": await create_key(access, "root", "admin"),
            "hr-editor": await create_key(access, "hr-editor", "editor", ["hr"]),
            "faq-editor": await create_key(access, "faq-editor", "editor", ["faq"]),
            "hr-reader": await create_key(access, "hr-reader", "reader", ["hr"]),
            "revoked": await create_key(access, "gone", "editor", ["hr"]),
        }
        assert await GuardStore(pool).revoke_api_key("gone")
        return made  # a key not made (None) gets no header

    with serving_keys(pg_dsn, settings, prepare) as (server, headers):
        yield server, headers


def test_each_role_is_told_only_the_corpora_it_may_change(keyed: tuple[LiveServer, Keys]) -> None:
    server, h = keyed
    got = {who: httpx.get(f"{server.url}/key", headers=h[who]) for who in ("admin", "hr-editor", "faq-editor")}
    assert all(r.status_code == 200 for r in got.values())
    admin = got["admin"].json()
    assert (admin["name"], admin["role"]) == ("root", "admin")
    assert admin["editable"] == [
        {"name": "faq", "title": "Questions people ask", "visibility": "public", "passageCount": 0},
        # No title given: the name, never a folder's name.
        {"name": "hr", "title": "hr", "visibility": "private", "passageCount": 0},
        {"name": "ops", "title": "Ops runbook", "visibility": "private", "passageCount": 0},
    ]
    # One key's grant never reaches another corpus, private or public.
    assert [(c["name"], c["visibility"]) for c in got["hr-editor"].json()["editable"]] == [("hr", "private")]
    assert got["hr-editor"].json()["role"] == "editor"
    assert [c["name"] for c in got["faq-editor"].json()["editable"]] == ["faq"]


def test_a_reader_may_change_nothing_even_where_it_may_read(keyed: tuple[LiveServer, Keys]) -> None:
    server, h = keyed
    reader = httpx.get(f"{server.url}/key", headers=h["hr-reader"])
    assert reader.status_code == 200
    assert reader.json() == {"name": "hr-reader", "role": "reader", "editable": []}


def test_no_key_a_revoked_key_and_an_unknown_key_are_401(keyed: tuple[LiveServer, Keys]) -> None:
    server, h = keyed
    none = httpx.get(f"{server.url}/key")
    assert none.status_code == 401 and none.json()["error"]["code"] == "api_key_required"
    for headers in (h["revoked"], {"Authorization": "Bearer not-a-key"}):
        refused = httpx.get(f"{server.url}/key", headers=headers)
        assert refused.status_code == 401 and refused.json()["error"]["code"] == "invalid_api_key"
        assert "hr" not in refused.text


def test_the_openapi_document_declares_it(keyed: tuple[LiveServer, Keys]) -> None:
    server, _ = keyed
    path = httpx.get(f"{server.url}/schema/openapi.json").json()["paths"]["/key"]
    assert set(path) == {"get"} and {"200", "401"} <= set(path["get"]["responses"])
