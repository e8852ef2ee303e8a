"""An answer from a crawled site, in real Chromium (issue 46): two chapters of our handbook rendered into the test
site's template, served on loopback, crawled into a corpus by `provenance sources sync`'s own code; the question
answered from it cites the page's address with its section's #fragment, and clicking the citation's link opens
that page, in a tab of its own, at the loopback site."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import pytest
import pytest_asyncio
from playwright.async_api import Browser, expect

from provenance.inference.embedder import Embedder
from provenance.settings import Settings
from provenance.sources.commands import add_site, sync_now
from provenance.store.pool import create_pool, migrate
from tests.browser.conftest import DESKTOP, HAVE_CHROMIUM, SKIP_REASON
from tests.conftest import CORPUS, LiveServer, make_settings
from tests.sources.site_build import render_page, source_pages
from tests.sources.site_server import SiteServer

pytestmark = pytest.mark.skipif(not HAVE_CHROMIUM, reason=SKIP_REASON)

CHAPTERS = ("02-hours-and-access.md", "05-storage-and-lockers.md")
QUESTION = "How much does a standard locker cost per month?"
LOCKERS = "/handbook/05-storage-and-lockers/"


@pytest.fixture(scope="module")
def makerspace_site() -> Iterator[SiteServer]:
    """Our handbook's two chapters as pages of the test site's template (no <main>, a div menu, a cookie banner)."""
    pages = [p for p in source_pages(CORPUS) if p.file.name in CHAPTERS]
    site = SiteServer({p.path: render_page(p, pages) for p in pages})
    site.start()
    yield site
    site.stop()


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def crawled_settings(
    pg_dsn: str, data_dir: Path, embedder: Embedder, makerspace_site: SiteServer
) -> AsyncIterator[Settings]:
    settings = make_settings(
        pg_dsn, data_dir, rate_limit_per_hour=0, cache_ttl_s=0, sources_allow_private=True, sources_delay_s=0.0
    )
    pool = await create_pool(pg_dsn, settings)
    try:
        await migrate(pool)
        await add_site(pool, "site", makerspace_site.origin + "/handbook/", {})
        assert await sync_now(pool, settings, "site", lambda: embedder) == 0
    finally:
        await pool.close()
    try:
        yield settings
    finally:
        conn = await asyncpg.connect(pg_dsn)
        try:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{settings.database.schema}" CASCADE')
        finally:
            await conn.close()


@pytest.fixture(scope="module")
def crawled_server(crawled_settings: Settings) -> Iterator[LiveServer]:
    with LiveServer(crawled_settings) as server:
        yield server


async def test_an_answer_from_a_crawled_site_links_to_the_page_it_cites(
    browser: Browser, crawled_server: LiveServer, makerspace_site: SiteServer
) -> None:
    context = await browser.new_context(viewport=DESKTOP)
    context.set_default_timeout(30_000)
    page = await context.new_page()
    try:
        await page.goto(f"{crawled_server.url}/?corpus=site")
        await page.get_by_test_id("question-input").fill(QUESTION)
        await page.get_by_test_id("ask-button").click()
        await expect(page.get_by_test_id("verdict")).to_have_attribute("data-status", "answered", timeout=120_000)
        await expect(page.get_by_test_id("answer")).to_contain_text("$14")

        # The lockers section's citation: its passage id names the source and the path, never the URL ...
        address = f"{makerspace_site.origin}{LOCKERS}#lockers"
        cited = page.get_by_test_id("citation").filter(has=page.locator(f'a[href="{address}"]'))
        await expect(cited).to_have_count(1)
        passage_id = await cited.get_attribute("data-passage-id")
        assert passage_id and "://" not in passage_id, passage_id
        assert passage_id.endswith("/handbook/05-storage-and-lockers.md#lockers"), passage_id
        # ... and the page shows the page's address, as a link to it.
        link = cited.get_by_test_id("citation-link")
        await expect(link).to_have_text(address)
        await expect(link).to_have_attribute("target", "_blank")
        await expect(link).to_have_attribute("rel", re.compile(r"\bnoopener\b"))

        before = sum(1 for h in makerspace_site.hits if h.path == LOCKERS)
        async with context.expect_page() as opened:
            await link.click()
        tab = await opened.value
        await tab.wait_for_load_state()
        assert tab.url == address
        await expect(tab.locator("h2#lockers")).to_have_text("Lockers")
        # The browser asked the loopback site itself for the page (the crawl's own requests came before).
        assert sum(1 for h in makerspace_site.hits if h.path == LOCKERS) == before + 1
        assert page.url.startswith(crawled_server.url)  # the answer stays where it was
    finally:
        await context.close()
