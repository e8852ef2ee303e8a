"""The chosen extractor on the test site's pages (tests/sources/site_build.py), without a crawl."""

from __future__ import annotations

import lxml.html
import pytest

from provenance.sources.extract import extract
from tests.sources.site_build import HANDBOOK, build

pytestmark = pytest.mark.skipif(not HANDBOOK.is_dir(), reason="the 18F handbook is not beside this checkout")

# The template's chrome as a reader would notice it (the site name and "Print this page" are links around
# the content; the others its boxes).
CHROME = ("We use cookies", "monthly newsletter", "Browse the handbook", "Stay in the loop", "Print this page")


@pytest.fixture(scope="module")
def site() -> dict[str, str]:
    return build()


def test_a_page_whose_content_is_its_title_keeps_its_title_and_none_of_the_template(site: dict[str, str]) -> None:
    """Where trafilatura finds too little, its rescue read every paragraph of the page: the banner and the
    newsletter were such a page's passages."""
    titled_only = [p for p in site if _content_words(site[p]) == 0]
    assert len(titled_only) >= 2
    for path in titled_only:
        text = " ".join(b.text for b in extract(site[path].encode(), "html").blocks)
        assert not any(piece in text for piece in [*CHROME, "TTS Handbook"]), (path, text)


def test_a_content_page_keeps_its_headings_and_its_lists_of_links(site: dict[str, str]) -> None:
    read = extract(site["/handbook/about/"].encode(), "html")
    headings = {b.text for b in read.blocks if b.level}
    assert "Principles" in headings
    assert not any(piece in " ".join(b.text for b in read.blocks) for piece in CHROME)


def _content_words(page: str) -> int:
    """Words of the template's content div beyond its h1 and its print link."""
    content = lxml.html.document_fromstring(page).get_element_by_id("content")
    for element in [*content.iter("h1"), *content.iter("a")]:
        element.drop_tree()
    return len(content.text_content().split())


def test_no_character_of_a_page_is_read_in_the_wrong_encoding(site: dict[str, str]) -> None:
    """trafilatura hands back text, which the HTML reader read again as bytes without a meta charset: lxml
    then took them for Latin-1, and every "’" of the crawled handbook became "â\\x80\\x99"."""
    pages = [path for path in site if "’" in site[path]][:10]
    assert len(pages) >= 5
    for path in pages:
        read = extract(site[path].encode(), "html")
        content = " ".join(b.text for b in read.blocks)
        assert "â\x80" not in content and "’" in content, (path, read.extractor)
