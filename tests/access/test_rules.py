"""The access rules themselves: every role against reading and writing, grants kept to their corpus, and a
default corpus that is never private. No database: these are the functions every guarded path calls."""

from __future__ import annotations

import pytest

from provenance.access.clients import OPERATOR, Client, Forbidden, require_admin, require_read, require_write
from provenance.errors import UnknownCorpus
from provenance.pipeline.corpora import CorpusRegistry, KnownCorpus
from provenance.wire import default_of

EXISTING = ("default", "garden", "hr", "ops")
PRIVATE = frozenset({"hr", "ops"})

PAGE = Client(private=PRIVATE)
READER = Client(key="plain", role="reader", private=PRIVATE)
HR_READER = Client(key="hr-reader", role="reader", grants={"hr": "reader"}, private=PRIVATE)
HR_EDITOR = Client(key="hr-editor", role="editor", grants={"hr": "editor"}, private=PRIVATE)
GARDEN_EDITOR = Client(key="garden-editor", role="editor", grants={"garden": "editor"}, private=PRIVATE)
ADMIN = Client(key="root", role="admin", private=PRIVATE)

# client -> (corpora it reads, corpora it writes)
RIGHTS = {
    "page": (PAGE, {"default", "garden"}, set()),
    "reader": (READER, {"default", "garden"}, set()),
    "hr-reader": (HR_READER, {"default", "garden", "hr"}, set()),
    "hr-editor": (HR_EDITOR, {"default", "garden", "hr"}, {"hr"}),
    "garden-editor": (GARDEN_EDITOR, {"default", "garden"}, {"garden"}),
    "admin": (ADMIN, set(EXISTING), set(EXISTING)),
    "operator": (OPERATOR, set(EXISTING), set(EXISTING)),
}


@pytest.mark.parametrize("who", RIGHTS)
def test_each_role_reads_and_writes_exactly_what_its_grants_and_role_allow(who: str) -> None:
    client, reads, writes = RIGHTS[who]
    assert {c for c in EXISTING if client.reads(c)} == reads
    assert {c for c in EXISTING if client.writes(c)} == writes
    assert client.visible(EXISTING) == sorted(reads)


@pytest.mark.parametrize("who", RIGHTS)
def test_a_corpus_a_client_may_not_read_is_refused_as_one_that_does_not_exist(who: str) -> None:
    client, reads, _ = RIGHTS[who]
    for corpus in [*EXISTING, "nowhere"]:
        if corpus in reads:
            require_read(client, corpus, EXISTING)
            continue
        with pytest.raises(UnknownCorpus) as hidden:
            require_read(client, corpus, EXISTING)
        with pytest.raises(UnknownCorpus) as absent:
            require_read(client, "nowhere", EXISTING)
        assert hidden.value.status == 404 and hidden.value.code == "unknown_corpus"
        # The same words, the name aside, and only the corpora this client can see.
        assert hidden.value.message.replace(repr(corpus), "NAME") == absent.value.message.replace("'nowhere'", "NAME")
        assert all(repr(p) not in hidden.value.message.split(": ", 1)[1] for p in PRIVATE - reads)


@pytest.mark.parametrize("who", RIGHTS)
def test_a_write_is_forbidden_only_to_a_client_that_can_see_the_corpus(who: str) -> None:
    client, reads, writes = RIGHTS[who]
    for corpus in EXISTING:
        if corpus in writes:
            require_write(client, corpus, EXISTING)
        elif corpus in reads:
            with pytest.raises(Forbidden) as forbidden:
                require_write(client, corpus, EXISTING)
            assert forbidden.value.status == 403 and forbidden.value.code == "forbidden"
        else:
            with pytest.raises(UnknownCorpus):
                require_write(client, corpus, EXISTING)


def test_only_an_admin_creates_and_removes_corpora() -> None:
    for client in (PAGE, READER, HR_READER, HR_EDITOR, GARDEN_EDITOR):
        with pytest.raises(Forbidden):
            require_admin(client)
    require_admin(ADMIN)
    require_admin(OPERATOR)


def test_one_keys_grant_never_reaches_another_corpus() -> None:
    editor = Client(key="hr-editor", role="editor", grants={"hr": "editor"}, private=PRIVATE)
    assert editor.reads("hr") and editor.writes("hr")
    assert not editor.reads("ops") and not editor.writes("ops")
    # Nor does a role reach further than its grants: an editor writes no corpus it wasn't granted.
    assert not editor.writes("garden") and not editor.writes("default")


def test_the_default_corpus_is_never_a_private_one_whatever_the_order() -> None:
    assert default_of(["aaa", "default", "zzz"]) == "default"
    assert default_of(["aaa", "default", "zzz"], {"default"}) == "aaa"
    assert default_of(["aaa", "bbb"], {"aaa"}) == "bbb"
    assert default_of(["aaa"], {"aaa"}) == "default"


async def test_asking_without_a_corpus_never_lands_on_a_private_one() -> None:
    registry = CorpusRegistry(None, None, None)  # type: ignore[arg-type]  # resolve reads only what it knows
    known = KnownCorpus(embedding_model="m", version="v1", passage_count=1)
    registry.known = {"aaa-private": known, "default": known, "public": known}
    page = Client(private=frozenset({"aaa-private", "default"}))
    assert await registry.resolve(None, page) == "public"
    assert await registry.resolve(None, ADMIN) == "default"

    registry.known = {"default": known}
    only_private = Client(key="root", role="admin", private=frozenset({"default"}))
    with pytest.raises(UnknownCorpus):
        # Not even for an admin: a private corpus is asked by its name.
        await registry.resolve(None, only_private)
