"""The page says what it answers from, in real Chromium: the served corpus's title, description and example
questions, and a picker when there is more than one corpus."""

from __future__ import annotations

import json
import re

import pytest
from playwright.async_api import Page, Request, expect

from tests.browser.conftest import HAVE_CHROMIUM, SKIP_REASON
from tests.conftest import LiveServer

pytestmark = pytest.mark.skipif(not HAVE_CHROMIUM, reason=SKIP_REASON)

GARDEN_IDS = {"README.md#intro", "README.md#more", "plots.md#plot-rent", "tools.md#tool-shed"}


async def test_the_page_names_its_corpus_and_asks_its_examples(page: Page, live_server: LiveServer) -> None:
    await page.goto(live_server.url)
    await expect(page.get_by_test_id("corpus-title")).to_have_text("Foundry Commons Makerspace handbook")
    await expect(page.get_by_test_id("corpus-description")).to_contain_text("membership and prices")
    # One corpus: nothing to pick.
    await expect(page.get_by_test_id("corpus-pick")).to_be_hidden()
    # corpus/examples.json, in its order; the one it marks as not covered is labelled so.
    await expect(page.get_by_test_id("example-0")).to_have_text("How much does a standard locker cost per month?")
    await expect(page.get_by_test_id("example-1")).to_have_text("What are the opening hours on Saturday?")
    await expect(page.get_by_test_id("example-2").locator(".example__q")).to_have_text(
        "Is there car parking for members?"
    )
    await expect(page.get_by_test_id("example-2").locator(".example__kicker")).to_be_visible()


async def test_a_second_corpus_is_picked_named_and_asked(page: Page, garden_server: LiveServer) -> None:
    asked: list[Request] = []
    page.on("request", lambda r: asked.append(r) if r.url.endswith("/ask") else None)
    await page.goto(garden_server.url)
    picker = page.get_by_test_id("corpus-select")
    await expect(page.get_by_test_id("corpus-pick")).to_be_visible()
    await expect(picker.locator("option")).to_have_text(
        ["Foundry Commons Makerspace handbook", "Wrenfield Community Garden guide"]
    )
    # The default corpus first, with its own examples.
    await expect(page.get_by_test_id("corpus-title")).to_have_text("Foundry Commons Makerspace handbook")
    await expect(page.get_by_test_id("example-0")).to_have_text("How much does a standard locker cost per month?")

    await picker.select_option("garden")
    await expect(page.get_by_test_id("corpus-title")).to_have_text("Wrenfield Community Garden guide")
    await expect(page.get_by_test_id("corpus-description")).to_have_text(
        "How the allotments, tools and compost work at the community garden on Mill Lane."
    )
    await expect(page.locator(".examples__list .example")).to_have_count(2)
    await expect(page.get_by_test_id("example-1")).to_have_text("When does the tool shed open?")
    await expect(page.get_by_test_id("example-0")).not_to_contain_text("locker")

    await page.get_by_test_id("example-0").click()
    await expect(page.get_by_test_id("verdict")).to_have_attribute("data-status", re.compile(r"^(answered|refused)$"))
    assert [json.loads(r.post_data or "{}") for r in asked] == [
        {"question": "How much is a half plot per year?", "corpus": "garden"}
    ]
    # The evidence shown is the garden's, never the handbook's.
    shown = await page.get_by_test_id("passage").evaluate_all("els => els.map(e => e.dataset.passageId)")
    assert shown and set(shown) <= GARDEN_IDS, shown
    await expect(page.get_by_test_id("pipeline-panel")).to_contain_text("corpus garden")


async def test_a_link_can_name_the_corpus(page: Page, garden_server: LiveServer) -> None:
    await page.goto(f"{garden_server.url}/?corpus=garden")
    await expect(page.get_by_test_id("corpus-title")).to_have_text("Wrenfield Community Garden guide")
    await expect(page.get_by_test_id("corpus-select")).to_have_value("garden")
