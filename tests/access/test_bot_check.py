"""Every way the bot check lets a client in says what it may read: a Turnstile-verified page, a page with no
bot check configured, a key, and the in-process runs. Against a real Postgres and a fake siteverify."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from provenance.access.store import AccessStore
from provenance.guards.apikeys import create_key
from provenance.guards.base import NoGuards
from provenance.guards.postgres import OperatorGuards, PostgresGuards
from provenance.settings import Settings
from provenance.store import Store
from tests.guards.test_turnstile import SECRET, FakeSiteverify


@pytest.fixture(scope="module")
def siteverify() -> Iterator[FakeSiteverify]:
    fake = FakeSiteverify()
    yield fake
    fake.close()


async def test_each_way_in_carries_what_the_client_may_read(fresh_store: Store, siteverify: FakeSiteverify) -> None:
    access = AccessStore(fresh_store.pool)
    assert await access.create_corpus("hr", "private", "", exists=False)
    assert await access.create_corpus("faq", "public", "", exists=False)
    key = await create_key(access, "hr-app", "reader", ["hr"])

    turnstile = Settings().with_overrides(turnstile_secret_key=SECRET, turnstile_verify_url=siteverify.url)
    guards = PostgresGuards(turnstile, fresh_store)
    try:
        page = await guards.bot_check("good-token", None, "198.51.100.7")
        assert page.stage.status == "ok" and page.client is not None
        assert page.client.key is None and page.client.private == {"hr"}
        assert page.client.reads("faq") and not page.client.reads("hr")

        forged = await guards.bot_check("forged", None, "198.51.100.7")
        assert forged.stage.status == "blocked" and forged.client is None

        keyed = await guards.bot_check(None, f"Bearer {key}", "198.51.100.7")
        assert keyed.client is not None and keyed.client.key == "hr-app" and keyed.client.reads("hr")
        assert not keyed.client.writes("hr")
    finally:
        await guards.aclose()

    unchecked = await PostgresGuards(Settings(), fresh_store).bot_check(None, None, "198.51.100.7")
    assert unchecked.client is not None and not unchecked.client.reads("hr")

    # Runs on the server itself read everything: whoever runs them can read the database anyway.
    for operator in (NoGuards(), OperatorGuards(Settings(), fresh_store)):
        inside = await operator.bot_check(None, None, None)
        assert inside.client is not None and inside.client.operator and inside.client.reads("hr")
