"""The page reads the streamed /ask in real Chromium: the pipeline panel fills as the stages complete, the
answer comes last, a failed stream falls back to the JSON request; and the evidence points at its sentence,
for an answer's claims and for a refusal's closest sentences."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from playwright.async_api import Page, Route, expect

from provenance.settings import Settings
from tests.browser.conftest import HAVE_CHROMIUM, SKIP_REASON
from tests.conftest import LiveServer
from tests.fake_anthropic import FakeAnthropic, fake_anthropic

__all__ = ["fake_anthropic"]  # the fixture, imported so pytest finds it here
pytestmark = pytest.mark.skipif(not HAVE_CHROMIUM, reason=SKIP_REASON)

ANSWERABLE = "How much does a standard locker cost per month?"
FRIEND = "Can I bring my friend along when I come in?"


@pytest.fixture
def slow_server(fake_anthropic: FakeAnthropic, corpus_schema_settings: Settings) -> Iterator[LiveServer]:
    """The anthropic profile against a fake Messages API that takes a second a call."""
    fake_anthropic.latency_s = 1.0
    with LiveServer(fake_anthropic.settings(corpus_schema_settings)) as server:
        yield server


async def test_the_panel_shows_retrieval_before_the_answer_arrives(page: Page, slow_server: LiveServer) -> None:
    await page.goto(slow_server.url)
    await page.get_by_test_id("question-input").fill(ANSWERABLE)
    await page.get_by_test_id("ask-button").click()
    progress = page.get_by_test_id("pipeline-progress")
    await expect(progress.get_by_test_id("stage-retrieval")).to_have_attribute("data-stage-status", "ok")
    # The model calls are still running: no verdict yet, and one stage shows that it is in progress.
    await expect(page.get_by_test_id("verdict")).to_have_count(0)
    await expect(progress.locator('[data-stage-status="running"]')).to_have_count(1)
    await expect(page.get_by_test_id("loading")).to_be_visible()
    # Then the answer, and the whole panel from the response.
    await expect(page.get_by_test_id("verdict")).to_have_attribute(
        "data-status", re.compile(r"^(answered|refused)$"), timeout=30_000
    )
    await expect(page.get_by_test_id("pipeline-progress")).to_have_count(0)
    await expect(page.get_by_test_id("pipeline-panel").get_by_test_id("stage-groundedness")).to_be_visible()


async def test_a_stream_that_fails_falls_back_to_the_json_request(page: Page, live_server: LiveServer) -> None:
    accepts: list[str] = []

    async def first_stream_fails(route: Route) -> None:
        accept = route.request.headers.get("accept", "")
        accepts.append(accept)
        if "text/event-stream" in accept:
            await route.abort()
        else:
            await route.continue_()

    await page.route("**/ask", first_stream_fails)
    await page.goto(live_server.url)
    await page.get_by_test_id("question-input").fill(ANSWERABLE)
    await page.get_by_test_id("ask-button").click()
    await expect(page.get_by_test_id("verdict")).to_have_attribute("data-status", "answered")
    await expect(page.get_by_test_id("error")).to_be_hidden()
    assert accepts == ["text/event-stream", "application/json"]


async def test_an_answer_highlights_the_sentence_that_supports_each_claim(page: Page, live_server: LiveServer) -> None:
    await page.goto(live_server.url)
    await page.get_by_test_id("question-input").fill(ANSWERABLE)
    await page.get_by_test_id("ask-button").click()
    await expect(page.get_by_test_id("verdict")).to_have_attribute("data-status", "answered")
    supporting = page.locator(".passage--supporting").first
    await supporting.locator("summary").click()
    mark = supporting.get_by_test_id("evidence-highlight").first
    await expect(mark).to_be_visible()
    await expect(mark).to_contain_text("$14")
    await expect(mark).to_have_attribute("title", re.compile(r"^Supports claim \d+$"))
    # The mark is the claim's own sentence (the local profile quotes), found by the server, not the page.
    claim = (await page.get_by_test_id("claim").first.locator(".claim__text").text_content() or "").split(": ", 1)[1]
    assert " ".join((await mark.text_content() or "").split()) == " ".join(claim.split())


async def test_a_refusal_highlights_each_passages_closest_sentence(page: Page, live_server: LiveServer) -> None:
    await page.goto(live_server.url)
    await page.get_by_test_id("question-input").fill(FRIEND)
    await page.get_by_test_id("ask-button").click()
    await expect(page.get_by_test_id("verdict")).to_have_attribute("data-status", "refused")
    closest = page.get_by_test_id("closest")
    assert await closest.count() == await page.get_by_test_id("passage").count() >= 1
    # A guest rule is pointed at, without opening any passage, and never as a verdict.
    guests = closest.filter(has_text=re.compile(r"guests? at a time"))
    await expect(guests).to_have_count(1)
    await expect(guests).to_contain_text(
        re.compile(r"^(Closest to your question|May answer your question — check it):")
    )
    await expect(closest.first).to_have_attribute("data-by", re.compile(r"^(relevance|similarity)$"))
    # Inside the passage too, highlighted.
    card = page.get_by_test_id("passage").filter(has=guests)
    await card.locator("summary").click()
    await expect(card.get_by_test_id("closest-highlight")).to_contain_text(re.compile(r"guests? at a time"))


@pytest.fixture
def writing_server(fake_anthropic: FakeAnthropic, corpus_schema_settings: Settings) -> Iterator[LiveServer]:
    """The anthropic profile against a fake Messages API whose model writes slowly, one pipeline at a time and
    no queue: a slot a cancelled question still held would turn the next one away."""
    fake_anthropic.stream_delay_s = 0.3
    settings = fake_anthropic.settings(corpus_schema_settings, ask_concurrency=1, ask_queue_max=0)
    with LiveServer(settings) as server:
        yield server


async def test_the_wait_is_shown_and_cancel_frees_the_slot(
    page: Page, writing_server: LiveServer, fake_anthropic: FakeAnthropic
) -> None:
    await page.goto(writing_server.url)
    await page.get_by_test_id("question-input").fill(ANSWERABLE)
    await page.get_by_test_id("ask-button").click()
    line = page.get_by_test_id("progress-line")
    # The model's tokens and the seconds so far, never its words.
    await expect(line).to_have_text(re.compile(r"^The model is writing: \d+ tokens?, \d+ s$"))
    cancel = page.get_by_test_id("cancel-button")
    await expect(cancel).to_be_visible()
    await cancel.click()
    await expect(page.get_by_test_id("loading")).to_be_hidden()
    await expect(page.get_by_test_id("error")).to_contain_text("You cancelled the question")
    await expect(page.get_by_test_id("verdict")).to_have_count(0)
    await expect(page.get_by_test_id("ask-button")).to_be_enabled()
    # The server stopped the cancelled question's work: with its one slot free, the next question is answered.
    fake_anthropic.stream_delay_s = 0.0
    await page.get_by_test_id("ask-button").click()
    await expect(page.get_by_test_id("verdict")).to_have_attribute(
        "data-status", re.compile(r"^(answered|refused)$"), timeout=30_000
    )
    await expect(page.get_by_test_id("error")).to_be_hidden()
