"""A conversation in a real browser (Debian's Chromium) against the real app, at a desktop and a phone width:
three turns with a refusal in the middle, each keeping its own verdict and evidence, what was searched shown
where it differs from what was typed, a reload that keeps the thread, and New conversation."""

from __future__ import annotations

import pytest
from playwright.async_api import Browser, Page, expect

from tests.browser.conftest import HAVE_CHROMIUM, SKIP_REASON
from tests.browser.test_spa import ANSWERABLE, UNCOVERED, WIDER_THAN_VIEWPORT, ask
from tests.conftest import LiveServer

pytestmark = pytest.mark.skipif(not HAVE_CHROMIUM, reason=SKIP_REASON)

MAKER = "How much is Maker membership per month?"
STUDENTS = "Is it cheaper for students?"


async def current(page: Page, status: str) -> None:
    # A whole /ask on two shared cores can take longer than expect's default 5 s.
    verdict = page.locator("#result [data-testid=verdict]")
    await expect(verdict).to_have_attribute("data-status", status, timeout=30_000)


async def follow_up(page: Page, question: str, *, keyboard: bool = False) -> None:
    box = page.get_by_test_id("followup-input")
    await box.fill(question)
    if keyboard:
        await box.press("Enter")
    else:
        await page.get_by_test_id("followup-button").click()


@pytest.mark.parametrize("width", [1280, 390])
async def test_a_three_turn_thread_with_a_refusal_in_the_middle_survives_a_reload_and_starts_over(
    browser: Browser, live_server: LiveServer, width: int
) -> None:
    phone = width < 600
    context = await browser.new_context(viewport={"width": width, "height": 900}, is_mobile=phone, has_touch=phone)
    context.set_default_timeout(15_000)
    page = await context.new_page()
    try:
        await page.goto(live_server.url)
        await expect(page.get_by_test_id("followup-form")).to_be_hidden()
        await ask(page, MAKER)
        await current(page, "answered")
        await expect(page.get_by_test_id("followup-form")).to_be_visible()

        await follow_up(page, STUDENTS)
        await current(page, "answered")
        # What was searched is shown where it differs from what was typed.
        await expect(page.locator("#result [data-testid=standalone]")).to_contain_text("Maker membership")
        await follow_up(page, UNCOVERED, keyboard=True)
        await current(page, "refused")
        turns = page.get_by_test_id("turn")
        await expect(turns).to_have_count(2)
        # Each earlier turn keeps its own verdict and evidence.
        await expect(turns.nth(0).get_by_test_id("verdict")).to_have_attribute("data-status", "answered")
        await expect(turns.nth(1).get_by_test_id("verdict")).to_have_attribute("data-status", "answered")
        await expect(turns.nth(1).get_by_test_id("standalone")).to_contain_text("Maker membership")
        assert await page.evaluate(WIDER_THAN_VIEWPORT) == []

        await page.reload()
        kept = page.get_by_test_id("turn")
        await expect(kept).to_have_count(3)
        await expect(kept.nth(0)).to_contain_text("$85")
        await expect(kept.nth(1).get_by_test_id("standalone")).to_contain_text("Maker membership")
        await expect(kept.nth(2)).to_have_attribute("data-status", "refused")
        # A refused turn shows no answer text after the reload either.
        assert "$" not in await kept.nth(2).inner_text()
        await expect(page.get_by_test_id("followup-form")).to_be_visible()
        # The thread goes on after the reload: the refusal is now in its middle.
        await follow_up(page, ANSWERABLE)
        await current(page, "answered")
        await expect(kept).to_have_count(3)
        assert await page.evaluate(WIDER_THAN_VIEWPORT) == []

        await page.get_by_test_id("new-conversation").click()
        await expect(page.get_by_test_id("turn")).to_have_count(0)
        await expect(page.get_by_test_id("followup-form")).to_be_hidden()
        await expect(page.get_by_test_id("question-input")).to_be_focused()
        await page.reload()
        await expect(page.get_by_test_id("followup-form")).to_be_hidden()
        await ask(page, ANSWERABLE)
        await current(page, "answered")
        await expect(page.get_by_test_id("turn")).to_have_count(0)
    finally:
        await context.close()
