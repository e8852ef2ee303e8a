"""A site as a source of a corpus, against a real Postgres and the loopback test site: `provenance sources sync`
runs the queue's sync job in the foreground, prints one line per source, and a re-sync embeds only what
changed. A small slice of the handbook (12 pages) keeps the embedding within the test's time."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator

import pytest

from provenance.inference.embedder import Embedder
from provenance.jobs.sites import page_path
from provenance.jobs.worker import JobRun
from provenance.settings import Settings
from provenance.sources.commands import add_site, sources
from provenance.stages.retrieve import VECTOR_WEIGHT, hybrid_pool
from provenance.store import Store
from provenance.store.sources import Document, SourceStore
from tests.sources.site_build import HANDBOOK, build
from tests.sources.site_server import SiteServer

pytestmark = pytest.mark.skipif(not HANDBOOK.is_dir(), reason="the 18F handbook is not beside this checkout")

SUMMARY = re.compile(r"^\d+ pages: \d+ embedded, \d+ unchanged, \d+ removed, \d+ failed$")
SLICE = sorted(p for p in build() if p.startswith("/handbook/tools/"))[:12]


@pytest.fixture
def site() -> Iterator[SiteServer]:
    pages = build()
    server = SiteServer({p: pages[p] for p in SLICE})
    server.start()
    yield server
    server.stop()


async def sync(store: Store, settings: Settings, embedder: Embedder, capsys: pytest.CaptureFixture[str]) -> str:
    args = argparse.Namespace(sources_command="sync", corpus="tools")
    assert await sources(store.pool, settings, args, lambda: embedder) == 0
    # The summary lines, not the structlog lines the worker writes to the same stdout.
    return "\n".join(line for line in capsys.readouterr().out.splitlines() if SUMMARY.match(line))


async def passages(store: Store) -> dict[str, str]:
    async with store.pool.acquire() as conn:
        rows = await conn.fetch("SELECT id, content_hash FROM passages WHERE corpus = 'tools'")
    return {r["id"]: r["content_hash"] for r in rows}


async def test_a_site_synced_twice_embeds_its_pages_once_and_a_change_only_its_own(
    fresh_store: Store, embedder: Embedder, capsys: pytest.CaptureFixture[str], site: SiteServer
) -> None:
    settings = Settings().with_overrides(sources_delay_s=0.0, sources_allow_private=True, log_level="warning")
    source_id, made = await add_site(fresh_store.pool, "tools", site.origin + "/handbook/tools/", {})
    assert made

    first = await sync(fresh_store, settings, embedder, capsys)
    assert first.splitlines()[0] == "12 pages: 12 embedded, 0 unchanged, 0 removed, 0 failed"
    before = await passages(fresh_store)
    assert before and all(i.startswith(source_id[:12] + "/handbook/tools/") for i in before)
    assert not any("://" in i for i in before)
    # What a citation shows: the page's URL, with the section's heading id where the page gives one.
    async with fresh_store.pool.acquire() as conn:
        cited = dict(await conn.fetch("SELECT id, source FROM passages WHERE corpus = 'tools'"))
    assert all(c.startswith(site.origin + "/handbook/tools/") for c in cited.values())
    fragments = [(i, c) for i, c in cited.items() if "#" in c]
    assert fragments
    for _, source in fragments:
        page, fragment = source.removeprefix(site.origin).split("#")
        assert f'id="{fragment}"' in site.pages[page]  # a heading of that page: the link opens at it

    site.hits.clear()
    again = await sync(fresh_store, settings, embedder, capsys)
    assert again.splitlines()[0] == "12 pages: 0 embedded, 12 unchanged, 0 removed, 0 failed"
    # Every request of the re-sync was conditional, robots.txt's and the sitemap's (kept by the job) too.
    assert len(site.hits) == 14 and all(h.conditional and h.status == 304 for h in site.hits)
    assert await passages(fresh_store) == before

    changed, removed = SLICE[0], SLICE[1]
    site.pages[changed] = site.pages[changed].replace(
        "</h1>", "</h1><p>Reviewed every quarter by the tools team.</p>", 1
    )
    del site.pages[removed]
    site.errors.add(SLICE[2])  # a server error in the middle of the sync: that page stays as it was
    third = await sync(fresh_store, settings, embedder, capsys)
    assert third.splitlines()[0] == "12 pages: 1 embedded, 9 unchanged, 1 removed, 1 failed"
    after = await passages(fresh_store)
    gone = page_path(source_id, site.origin + removed).removesuffix(".md")
    kept = page_path(source_id, site.origin + SLICE[2]).removesuffix(".md")
    edited = page_path(source_id, site.origin + changed).removesuffix(".md")
    assert not any(i.startswith(gone + ".md#") for i in after)
    assert {i for i in after if i.startswith(kept)} == {i for i in before if i.startswith(kept)}
    differ = {i for i in after if after[i] != before.get(i)}
    assert differ and all(i.startswith(edited) for i in differ)  # only the changed page's passages are new
    listed = [s for s in await SourceStore(fresh_store.pool).sources("tools") if s.kind == "site"]
    assert [s.synced_at is not None for s in listed] == [True]


TWO_SECTIONS = ("/handbook/tools/", "/handbook/travel-and-leave/")


@pytest.fixture
def two_sections() -> Iterator[SiteServer]:
    """Three pages of each of two sections: two sites of one corpus, by their prefixes."""
    pages = build()
    chosen = [p for prefix in TWO_SECTIONS for p in sorted(q for q in pages if q.startswith(prefix))[:3]]
    server = SiteServer({p: pages[p] for p in chosen})
    server.start()
    yield server
    server.stop()


@pytest.fixture
def rebuilds(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Each rebuild a job makes, counted (the number of documents it was given)."""
    counted: list[int] = []
    rebuild = JobRun.rebuild

    async def counting(run: JobRun, docs: list[tuple[Document, bytes]]) -> dict[str, str]:
        counted.append(len(docs))
        return await rebuild(run, docs)

    monkeypatch.setattr(JobRun, "rebuild", counting)
    return counted


async def add_two_sites(store: Store, site: SiteServer) -> list[str]:
    return [(await add_site(store.pool, "tools", site.origin + prefix, {}))[0] for prefix in TWO_SECTIONS]


async def test_a_sync_of_two_sites_rebuilds_the_corpus_once(
    fresh_store: Store,
    embedder: Embedder,
    capsys: pytest.CaptureFixture[str],
    two_sections: SiteServer,
    rebuilds: list[int],
) -> None:
    settings = Settings().with_overrides(sources_delay_s=0.0, sources_allow_private=True, log_level="warning")
    await add_two_sites(fresh_store, two_sections)
    first = await sync(fresh_store, settings, embedder, capsys)
    assert first.splitlines() == ["3 pages: 3 embedded, 0 unchanged, 0 removed, 0 failed"] * 2
    assert rebuilds == [6]  # both sites' pages, in one rebuild

    for prefix in TWO_SECTIONS:  # a page of each site changes
        path = next(p for p in two_sections.pages if p.startswith(prefix))
        two_sections.pages[path] = two_sections.pages[path].replace("</h1>", "</h1><p>Reviewed this quarter.</p>", 1)
    second = await sync(fresh_store, settings, embedder, capsys)
    assert second.splitlines() == ["3 pages: 1 embedded, 2 unchanged, 0 removed, 0 failed"] * 2
    assert rebuilds == [6, 6]

    third = await sync(fresh_store, settings, embedder, capsys)  # nothing changed: nothing rebuilt
    assert third.splitlines() == ["3 pages: 0 embedded, 3 unchanged, 0 removed, 0 failed"] * 2
    assert rebuilds == [6, 6]


async def search(store: Store, embedder: Embedder, question: str) -> list[str]:
    found = await store.hybrid_search(
        embedder.embed_query(question),
        question,
        4,
        pool_size=hybrid_pool(4),
        vector_weight=VECTOR_WEIGHT,
        corpus="tools",
        exact=True,
    )
    return [p.id for p in found]


async def test_a_removed_site_is_no_longer_retrieved_once_the_command_returns(
    fresh_store: Store, embedder: Embedder, capsys: pytest.CaptureFixture[str], two_sections: SiteServer
) -> None:
    settings = Settings().with_overrides(sources_delay_s=0.0, sources_allow_private=True, log_level="warning")
    removed_id, kept_id = await add_two_sites(fresh_store, two_sections)
    await sync(fresh_store, settings, embedder, capsys)
    before = await passages(fresh_store)
    asked = next(i for i in before if i.startswith(removed_id[:12]))
    async with fresh_store.pool.acquire() as conn:
        question = await conn.fetchval("SELECT text FROM passages WHERE corpus = 'tools' AND id = $1", asked)
    assert asked in await search(fresh_store, embedder, question)

    args = argparse.Namespace(sources_command="remove", corpus="tools", url=two_sections.origin + TWO_SECTIONS[0])
    assert await sources(fresh_store.pool, settings, args, lambda: embedder) == 0
    assert f"removed {two_sections.origin + TWO_SECTIONS[0]} from tools: 3 pages" in capsys.readouterr().out

    # At once, not at the next sync: none of its passages is served or found, the other site's are as they were.
    after = await passages(fresh_store)
    assert not any(i.startswith(removed_id[:12]) for i in after)
    assert after == {i: h for i, h in before.items() if i.startswith(kept_id[:12])}
    assert not any(i.startswith(removed_id[:12]) for i in await search(fresh_store, embedder, question))
    listed = SourceStore(fresh_store.pool)
    assert [s.id for s in await listed.sources("tools")] == [kept_id]
    assert {d.source_id for d in await listed.documents("tools")} == {kept_id}
    async with fresh_store.pool.acquire() as conn:
        assert await conn.fetchval("SELECT count(*) FROM site_pages WHERE source_id = $1", removed_id) == 0
