"""The page with a reading judge: every claim says who judged it (by the model's name, and whether it is
independent of the writer), and the header names the judge and says when it is uncalibrated. The judge is a
scripted OpenAI-compatible server on loopback (`tests.scripted_server`), the rest the real service."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import pytest
import pytest_asyncio
from playwright.async_api import Page, expect

from provenance.settings import Settings
from tests.browser.test_spa import ANSWERABLE, ask
from tests.conftest import LiveServer
from tests.scripted_server import ScriptedServer, logprob_reply

JUDGE = "scripted-judge"


@pytest_asyncio.fixture(loop_scope="session")
async def judge_url() -> AsyncIterator[str]:
    server = ScriptedServer(model=JUDGE)
    server.reply = lambda request: (200, logprob_reply(JUDGE, 0.96))
    url = await server.start()
    yield url
    await server.close()


@pytest.fixture
def judged_server(corpus_schema_settings: Settings, judge_url: str) -> Iterator[LiveServer]:
    settings = corpus_schema_settings.with_overrides(
        judge="openai", judge_base_url=judge_url, judge_model=JUDGE, judge_max_retries=0, cache_ttl_s=0
    )
    with LiveServer(settings) as server:
        yield server


async def test_the_page_names_the_judge_of_every_claim(page: Page, judged_server: LiveServer) -> None:
    await page.goto(judged_server.url)
    await expect(page.locator("#profile")).to_contain_text(f"judge: {JUDGE} (uncalibrated)")
    await ask(page, ANSWERABLE)
    # The judge is scripted and answers at once; the rest of the service shares a busy machine.
    await expect(page.get_by_test_id("verdict")).to_have_attribute("data-status", "answered", timeout=60_000)
    judged = page.get_by_test_id("claim-judge")
    assert await judged.count() == await page.get_by_test_id("claim").count() >= 1
    await expect(judged.first).to_contain_text(f"Judged by {JUDGE}, independent of the writer")
    await expect(judged.first).to_contain_text("answers the question: 0.96")
