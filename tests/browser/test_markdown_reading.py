"""A handbook as it comes from a GitHub repository, asked in real Chromium: no Markdown syntax shows in the
answer, the claims or the passages, the breadcrumb is the whole heading path, and the dental plan's sentence
is not the answer about the medical premium (issue 33)."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import pytest_asyncio
from playwright.async_api import Page, expect

from provenance.inference.embedder import Embedder
from provenance.services import Services
from provenance.settings import Settings
from tests.browser.conftest import HAVE_CHROMIUM, SKIP_REASON
from tests.conftest import LiveServer
from tests.reliability.support import corpus_copy, drop_schema

pytestmark = pytest.mark.skipif(not HAVE_CHROMIUM, reason=SKIP_REASON)

PERKS = """---
title: Benefits & Perks
---
{% include toc.html %}

Everyone at the company gets [11 local holidays](https://3.basecamp.com/x/holidays) and *three* weeks of
vacation a year, on top of the **benefits** below.

## Health Insurance

### Medical Insurance

The company pays 75% of the premium and the employee pays the other 25%.

* Employee-only medical coverage: $95.10 a month
* Employee-family medical coverage: $287.65 a month

### Dental Insurance

The company pays 100% of the premium.

## Salaries

We pay everyone in the same role the same, with a [salary floor](https://m.signalvnoise.com/floor).

| Level | Salary |
|---|---|
| Junior (L1) | $73,500 |
| Senior (L3) | $128,000 |
"""
SYNTAX = re.compile(r"\]\(|\*\*|(?<![\w$])\*\w|\{%|\{\{|\|\s*[-:]{3}|^\s*\|", re.MULTILINE)


@pytest_asyncio.fixture(loop_scope="session")
async def perks(
    pg_dsn: str, data_dir: Path, embedder: Embedder, tmp_path: Path, corpus_services: Services
) -> AsyncIterator[Settings]:
    folder = tmp_path / "perks"
    folder.mkdir()
    (folder / "perks.md").write_text(PERKS)
    settings = await corpus_copy(pg_dsn, data_dir, embedder, folder, sources=(), rate_limit_per_hour=0, cache_ttl_s=0)
    yield settings
    await drop_schema(pg_dsn, settings.database.schema)


@pytest.fixture
def perks_server(perks: Settings) -> Iterator[LiveServer]:
    with LiveServer(perks) as server:
        yield server


async def shown(page: Page, test_id: str) -> list[str]:
    items = page.get_by_test_id(test_id)
    return [await items.nth(i).text_content() or "" for i in range(await items.count())]


async def test_no_markdown_syntax_shows_and_the_medical_premium_is_the_medical_plans(
    page: Page, perks_server: LiveServer
) -> None:
    await page.goto(perks_server.url)
    await page.get_by_test_id("question-input").fill("Who pays the medical insurance premium?")
    await page.get_by_test_id("ask-button").click()
    await expect(page.get_by_test_id("verdict")).to_have_attribute("data-status", "answered")
    answer = page.get_by_test_id("answer")
    await expect(answer).to_contain_text("75% of the premium")
    await expect(answer).not_to_contain_text("100%")

    texts = [await answer.text_content() or "", *await shown(page, "claim"), *await shown(page, "passage")]
    assert len(texts) >= 3
    for text in texts:
        assert not SYNTAX.search(text), text
    passages = "\n".join(await shown(page, "passage"))
    assert "Benefits & Perks > Health Insurance > Medical Insurance" in passages  # the whole path
    assert "Medical Insurance." not in passages  # a subheading is the breadcrumb, not a sentence

    await page.get_by_test_id("question-input").fill("What is the salary of a junior?")
    await page.get_by_test_id("ask-button").click()
    # The first answer's verdict stays on show until the stream starts: wait for the second question's end.
    await expect(page.get_by_test_id("loading")).to_be_hidden()
    await expect(page.get_by_test_id("verdict")).to_have_attribute("data-status", re.compile(r"^(answered|refused)$"))
    texts = [*await shown(page, "answer"), *await shown(page, "claim"), *await shown(page, "passage")]
    table = "\n".join(await shown(page, "passage"))
    assert "Level: Junior (L1), Salary: $73,500." in table and "salary floor" in table
    for text in texts:
        assert not SYNTAX.search(text), text
