"""The Documents page in real Chromium, against a real Postgres and the app with its ingest worker: paste an
editor's key, upload two files (one a zip named .pdf), watch each through its upload and its job to its outcome,
ask the new document on the Ask page with the key, then remove it after confirming; at 1280 px and at 390 px,
where nothing may overflow the viewport. The key stays in sessionStorage: never localStorage, never a URL."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import re
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from playwright.async_api import Browser, Page, Request, ViewportSize, expect

from provenance.access.store import AccessStore
from provenance.guards.apikeys import create_key
from provenance.store.pool import create_pool, migrate
from tests.browser.conftest import HAVE_CHROMIUM, SKIP_REASON
from tests.conftest import LiveServer, make_settings
from tests.reliability.support import drop_schema

pytestmark = pytest.mark.skipif(not HAVE_CHROMIUM, reason=SKIP_REASON)

POLICY = b"# Travel policy\n\n## Per diem\n\nThe per diem for meals is $64 a day in every city.\n"
NOT_A_PDF = b"PK\x03\x04 a zip, not a PDF"
# Where the screenshots go (to look at them): SCREENSHOTS, else the test's own temporary folder.
SHOTS = os.environ.get("SCREENSHOTS")

# Every status an upload's row passes through, as the page sets it (data-status), gathered in the page.
WATCH = """() => {
  window.seen = {};
  new MutationObserver((records) => {
    for (const r of records) {
      const li = r.target.closest && r.target.closest('[data-testid="upload"]');
      if (!li) continue;
      const name = li.dataset.fileName;
      window.seen[name] = window.seen[name] || [];
      const last = window.seen[name][window.seen[name].length - 1];
      if (last !== li.dataset.status) window.seen[name].push(li.dataset.status);
    }
  }).observe(document.getElementById('uploads'), { subtree: true, attributes: true, childList: true,
    attributeFilter: ['data-status'] });
}"""

# Files dropped on the drop zone as a browser drops them: a DataTransfer in a drop event.
DROP = """([zone, files]) => {
  const dt = new DataTransfer();
  for (const f of files) dt.items.add(new File([Uint8Array.from(atob(f.b64), (c) => c.charCodeAt(0))], f.name,
    { type: f.type }));
  zone.dispatchEvent(new DragEvent('dragover', { dataTransfer: dt, bubbles: true, cancelable: true }));
  zone.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
}"""


@pytest.fixture(scope="module")
def docs_server(pg_dsn: str, data_dir: Path) -> Iterator[tuple[LiveServer, str]]:
    """A fresh schema with no corpus, an admin's key to make two private corpora, and an editor's key granted
    both: the one the page is given."""
    settings = make_settings(pg_dsn, data_dir, rate_limit_per_hour=0, cache_ttl_s=0)

    async def keys() -> tuple[str, str]:
        pool = await create_pool(pg_dsn, settings)
        try:
            await migrate(pool)
            access = AccessStore(pool)
            admin = await create_key(access, "root", "admin")
            editor = await create_key(access, "docs-team", "editor", ["travel-1280", "travel-390"])
            assert admin and editor
            return admin, editor
        finally:
            await pool.close()

    admin, editor = asyncio.run(keys())
    try:
        with LiveServer(settings) as server:
            for width in (1280, 390):
                made = httpx.post(
                    f"{server.url}/corpora",
                    json={"name": f"travel-{width}", "visibility": "private", "title": f"Travel handbook {width}"},
                    headers={"Authorization": f"Bearer {admin}"},
                )
                assert made.status_code == 201, made.text
            yield server, editor
    finally:
        asyncio.run(drop_schema(pg_dsn, settings.database.schema))


async def no_overflow(page: Page) -> None:
    """Nothing wider than the viewport: the page never scrolls sideways."""
    widths = await page.evaluate("[document.documentElement.scrollWidth, window.innerWidth]")
    assert widths[0] <= widths[1], widths


async def shoot(page: Page, name: str, tmp_path: Path) -> None:
    folder = Path(SHOTS) if SHOTS else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    await page.screenshot(path=str(folder / f"{name}.png"), full_page=True)


@pytest.mark.parametrize("width", [1280, 390])
async def test_an_editor_uploads_watches_asks_and_removes_a_document(
    browser: Browser, docs_server: tuple[LiveServer, str], width: int, tmp_path: Path
) -> None:
    server, key = docs_server
    corpus, title = f"travel-{width}", f"Travel handbook {width}"
    viewport: ViewportSize = {"width": width, "height": 900}
    context = await browser.new_context(viewport=viewport)
    context.set_default_timeout(30_000)
    page = await context.new_page()
    try:
        # Without the key the private corpus is nowhere on the Ask page.
        await page.goto(server.url)
        await expect(page.get_by_test_id("keyed")).to_be_hidden()
        assert title not in await page.content()

        await page.get_by_test_id("documents-link").click()
        # The page's script must hold the form before a key is typed: Enter before it reloaded the page, and
        # the wrong key's error never came (2 of 6 full runs, either width).
        await expect(page.locator("body[data-ready]")).to_have_count(1)
        await page.get_by_test_id("api-key").fill("not-a-key")
        await page.get_by_test_id("api-key").press("Enter")
        await expect(page.get_by_test_id("key-error")).to_have_text("That key is not known, or it was revoked.")
        await page.get_by_test_id("api-key").fill(key)
        await page.get_by_test_id("api-key").press("Enter")
        await expect(page.get_by_test_id("who")).to_have_text("Key docs-team · editor")
        assert await page.evaluate("localStorage.length") == 0
        assert await page.evaluate("sessionStorage.getItem('provenance.apiKey')") == key
        assert key not in page.url

        await page.get_by_test_id("docs-corpus").select_option(corpus)
        await expect(page.get_by_test_id("docs-corpus-title")).to_have_text(title)
        await expect(page.get_by_test_id("private-badge")).to_be_visible()
        await expect(page.get_by_test_id("list-status")).to_have_text("No uploaded documents yet.")
        await shoot(page, f"documents-{width}-empty", tmp_path)
        await no_overflow(page)

        await page.evaluate(WATCH)
        streams: list[str] = []
        page.on("request", lambda r: streams.append(r.url) if r.url.endswith("/events") else None)
        files = [("policy.md", POLICY, "text/markdown"), ("scan.pdf", NOT_A_PDF, "application/pdf")]
        if width == 390:
            # Dropped on the zone, as from a file manager.
            payload = [{"name": n, "b64": base64.b64encode(b).decode(), "type": t} for n, b, t in files]
            await page.evaluate(DROP, [await page.get_by_test_id("dropzone").element_handle(), payload])
        else:
            # The file picker, reached from the keyboard.
            async with page.expect_file_chooser() as chooser:
                await page.get_by_test_id("choose-files").focus()
                await page.keyboard.press("Enter")
            await (await chooser.value).set_files([{"name": n, "mimeType": t, "buffer": b} for n, b, t in files])

        added = page.locator('[data-testid="upload"][data-file-name="policy.md"]')
        failed = page.locator('[data-testid="upload"][data-file-name="scan.pdf"]')
        await expect(added).to_have_attribute("data-status", "added", timeout=120_000)
        await expect(added.get_by_test_id("upload-status")).to_have_text("Added")
        await expect(failed).to_have_attribute("data-status", "failed")
        await expect(failed.get_by_test_id("upload-status")).to_contain_text("Failed: ")
        await expect(failed.get_by_test_id("upload-status")).to_contain_text("not a PDF")
        seen = await page.evaluate("window.seen")
        # Each row went through the job (queued, then running or straight to done) before its outcome.
        assert seen["policy.md"][-1] == "added" and seen["scan.pdf"][-1] == "failed", seen
        assert {"queued", "running"} & set(seen["policy.md"]), seen
        # The job was followed by its events (GET /jobs/{id}/events), not polled.
        assert len(streams) == 1 and "/jobs/" in streams[0], streams
        row = page.locator('[data-testid="document"][data-file-name="policy.md"]')
        await expect(row).to_be_visible()
        await expect(page.locator('[data-testid="document"]')).to_have_count(1)
        await shoot(page, f"documents-{width}-uploaded", tmp_path)
        await no_overflow(page)

        # The Ask page sends the key: the private corpus is listed by its title, and asked.
        asked: list[Request] = []
        page.on("request", lambda r: asked.append(r) if r.url.endswith("/ask") else None)
        await page.get_by_test_id("ask-link").click()
        await expect(page.get_by_test_id("keyed")).to_be_visible()
        await expect(page.get_by_test_id("corpus-title")).not_to_have_text("")
        if await page.get_by_test_id("corpus-pick").is_visible():
            # The other width's corpus is listed too (emptied, not removed): the picker names each by its title.
            picker = page.get_by_test_id("corpus-select")
            await expect(picker.locator(f'option[value="{corpus}"]')).to_have_text(title)
            await picker.select_option(corpus)
        await expect(page.get_by_test_id("corpus-title")).to_have_text(title)
        await page.get_by_test_id("question-input").fill("What is the per diem for meals?")
        await page.get_by_test_id("question-input").press("Enter")
        verdict = page.get_by_test_id("verdict")
        await expect(verdict).to_have_attribute("data-status", re.compile(r"^(answered|refused)$"), timeout=120_000)
        assert asked and all(r.headers.get("authorization") == f"Bearer {key}" for r in asked)
        assert json.loads(asked[0].post_data or "{}")["question"] == "What is the per diem for meals?"
        if await verdict.get_attribute("data-status") == "answered":
            await expect(page.get_by_test_id("citation").first).to_have_attribute(
                "data-passage-id", re.compile(r"policy\.md#per-diem$")
            )
        await shoot(page, f"ask-{width}-with-key", tmp_path)
        await no_overflow(page)

        # Back on the Documents page, the key is still kept (this tab's session): remove after confirming.
        await page.get_by_test_id("documents-link").click()
        await page.get_by_test_id("docs-corpus").select_option(corpus)
        await expect(page.get_by_test_id("list-status")).to_have_text("1 document.")
        row = page.locator('[data-testid="document"][data-file-name="policy.md"]')
        await row.get_by_test_id("remove").focus()
        await page.keyboard.press("Enter")
        await expect(row.get_by_test_id("confirm-remove")).to_be_focused()
        await page.keyboard.press("Escape")
        await expect(row.get_by_test_id("remove")).to_be_focused()
        await page.keyboard.press("Enter")
        await shoot(page, f"documents-{width}-confirm", tmp_path)
        await no_overflow(page)
        await page.keyboard.press("Enter")
        await expect(page.locator('[data-testid="document"]')).to_have_count(0, timeout=120_000)
        await expect(page.get_by_test_id("list-status")).to_have_text("No uploaded documents yet.")
        listed = await page.request.get(
            f"{server.url}/corpora/{corpus}/documents", headers={"Authorization": f"Bearer {key}"}
        )
        assert await listed.json() == {"documents": []}

        await page.get_by_test_id("forget-key").click()
        assert await page.evaluate("sessionStorage.getItem('provenance.apiKey')") is None
        await expect(page.get_by_test_id("key-form")).to_be_visible()
    finally:
        await context.close()
