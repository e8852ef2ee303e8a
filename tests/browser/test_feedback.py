""" "Was this right?" in a real browser (Debian's Chromium) against the real app, at a desktop and a phone width:
rate an answer and a refusal, change the verdict, by mouse and by keyboard; a blocked request asks nothing. The
verdicts are read back from the database, where the note is plain text."""

from __future__ import annotations

import json
from typing import Any

import asyncpg
import pytest
from playwright.async_api import Browser, Locator, Page, expect

from provenance.settings import Settings
from tests.browser.conftest import HAVE_CHROMIUM, SKIP_REASON
from tests.browser.test_spa import ANSWERABLE, INJECTION, UNCOVERED, WIDER_THAN_VIEWPORT, ask
from tests.conftest import LiveServer

pytestmark = pytest.mark.skipif(not HAVE_CHROMIUM, reason=SKIP_REASON)

HOSTILE_NOTE = '<img src=x onerror="window.__pwned = 1">it says $14, the list says otherwise'


async def verdicts(settings: Settings, request_id: str) -> list[dict[str, Any]]:
    conn = await asyncpg.connect(settings.database.url or "", server_settings={"search_path": settings.database.schema})
    try:
        rows = await conn.fetch("SELECT verdict, kind, note FROM feedback WHERE request_id = $1", request_id)
    finally:
        await conn.close()
    return [dict(r) for r in rows]


async def shows(page: Page, status: str) -> None:
    # A whole /ask on two shared cores can take longer than expect's default 5 s.
    await expect(page.get_by_test_id("verdict")).to_have_attribute("data-status", status, timeout=30_000)


async def rate(page: Page, click: Locator) -> dict[str, Any]:
    """Click (or press) and return the body the page sent to /feedback once its answer is shown."""
    async with page.expect_request(lambda r: r.url.endswith("/feedback")) as sent:
        await click.click()
    body: dict[str, Any] = json.loads((await sent.value).post_data or "{}")
    return body


@pytest.mark.parametrize("width", [1280, 390])
async def test_a_reader_rates_an_answer_and_a_refusal_and_changes_the_verdict(
    browser: Browser, live_server: LiveServer, corpus_schema_settings: Settings, width: int
) -> None:
    phone = width < 600
    context = await browser.new_context(viewport={"width": width, "height": 900}, is_mobile=phone, has_touch=phone)
    context.set_default_timeout(15_000)
    page = await context.new_page()
    try:
        await page.goto(live_server.url)
        # An answer: Yes, then No with a kind and a note; the second verdict replaces the first.
        await ask(page, ANSWERABLE)
        await shows(page, "answered")
        block = page.get_by_test_id("feedback")
        await expect(block).to_be_visible()
        await expect(block.get_by_role("heading", name="Was this right?")).to_be_visible()
        yes, no = block.get_by_role("button", name="Yes"), block.get_by_role("button", name="No")
        sent = await rate(page, yes)
        assert sent["verdict"] == "right" and "kind" not in sent
        status = block.get_by_test_id("feedback-status")
        await expect(status).to_contain_text("Thank you: you said that this was right")
        await expect(yes).to_have_attribute("aria-pressed", "true")
        assert await verdicts(corpus_schema_settings, sent["requestId"]) == [
            {"verdict": "right", "kind": None, "note": ""}
        ]

        await no.click()
        form = block.get_by_test_id("feedback-form")
        await expect(form).to_be_visible()
        await expect(no).to_have_attribute("aria-expanded", "true")
        await expect(form.get_by_role("radio", name="The answer is wrong")).to_be_checked()
        await form.get_by_label("Anything to add? (optional)").fill(HOSTILE_NOTE)
        changed = await rate(page, form.get_by_role("button", name="Send"))
        assert changed == {
            "requestId": sent["requestId"],
            "verdict": "wrong",
            "kind": "wrong_answer",
            "note": HOSTILE_NOTE,
        }
        await expect(status).to_contain_text("“The answer is wrong”")
        await expect(no).to_have_attribute("aria-pressed", "true")
        await expect(yes).to_have_attribute("aria-pressed", "false")
        await expect(form).to_be_hidden()
        assert await verdicts(corpus_schema_settings, sent["requestId"]) == [
            {"verdict": "wrong", "kind": "wrong_answer", "note": HOSTILE_NOTE}
        ]
        assert await page.evaluate("window.__pwned") is None

        # A refusal, by keyboard alone: No opens the choices on "It should have answered"; Tab to the note.
        await ask(page, UNCOVERED)
        await shows(page, "refused")
        block = page.get_by_test_id("feedback")
        no = block.get_by_role("button", name="No")
        await no.focus()
        await page.keyboard.press("Enter")
        kind = block.get_by_role("radio", name="It should have answered")
        await expect(kind).to_be_checked()
        await expect(kind).to_be_focused()
        await page.keyboard.press("ArrowDown")  # the next kind: "Something else"
        await expect(block.get_by_role("radio", name="Something else")).to_be_checked()
        await page.keyboard.press("Tab")
        await expect(block.get_by_test_id("feedback-note")).to_be_focused()
        await page.keyboard.type("parking is on the map")
        await page.keyboard.press("Tab")
        await expect(block.get_by_role("button", name="Send")).to_be_focused()
        async with page.expect_request(lambda r: r.url.endswith("/feedback")) as posted:
            await page.keyboard.press("Enter")
        refusal = json.loads((await posted.value).post_data or "{}")
        assert (refusal["verdict"], refusal["kind"], refusal["note"]) == ("wrong", "other", "parking is on the map")
        await expect(block.get_by_test_id("feedback-status")).to_contain_text("“Something else”")
        # And changed by keyboard to right.
        await block.get_by_role("button", name="Yes").focus()
        async with page.expect_request(lambda r: r.url.endswith("/feedback")):
            await page.keyboard.press("Enter")
        await expect(block.get_by_test_id("feedback-status")).to_contain_text("that this was right")
        assert await verdicts(corpus_schema_settings, refusal["requestId"]) == [
            {"verdict": "right", "kind": None, "note": ""}
        ]

        if phone:
            assert await page.evaluate("document.scrollingElement.scrollWidth") <= width
            assert await page.evaluate(WIDER_THAN_VIEWPORT) == []

        # A blocked request asks nothing.
        await ask(page, INJECTION)
        await shows(page, "blocked")
        await expect(page.get_by_test_id("feedback")).to_have_count(0)
    finally:
        await context.close()
