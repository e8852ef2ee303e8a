"""What a crawled page gives: its content as the chunker's blocks, its links (for the walk), its
`rel=canonical`, and the ids of its headings (so a citation can point at `page#heading`).

HTML content is read by one of two extractors, chosen on the test site's figures (docs/crawling.md):
- `reader`: the HTML reader ingest uses (`ingest.documents.html`), which drops what the page marks as chrome
  (`nav`, `aside`, forms, page `header`/`footer`, ARIA roles) and reads only `<main>` when there is one;
- `trafilatura`: a maintained main-content extractor that also finds the content of pages that mark
  nothing; it hands back the content as HTML, which the HTML reader then reads (headings, lists, tables).
PDF and Word bodies go to their own readers, as in ingest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import lxml.html
import trafilatura
from trafilatura.xpaths import OVERALL_DISCARD_XPATH

from provenance.ingest.documents.blocks import Block, collapse
from provenance.ingest.documents.html import parse_html, read_html
from provenance.ingest.documents.read import read_document
from provenance.sources.fetch import Kind

Extractor = Literal["reader", "trafilatura"]
CHOSEN: Extractor = "trafilatura"
_HEADINGS = {f"h{n}" for n in range(1, 7)}


@dataclass(frozen=True)
class Extracted:
    blocks: list[Block]
    title: str | None = None
    canonical: str | None = None  # as the page wrote it; resolve against the page's URL
    links: list[str] = field(default_factory=list)  # hrefs as written
    anchors: dict[str, str] = field(default_factory=dict)  # heading text -> its element id
    extractor: str = ""  # which one read the content ("trafilatura", "reader", or the reader of a PDF/DOCX)


def extract(raw: bytes, kind: Kind, extractor: Extractor = CHOSEN, charset: str | None = None) -> Extracted:
    """Raises UnreadableDocument when the body can't be read as its kind. `charset`: the response's, if it
    named one."""
    if kind != "html":
        return Extracted(read_document(f"page.{kind}", raw), extractor=kind)
    root = parse_html(raw, charset)
    title = collapse(root.findtext(".//title") or "") or None
    canonical = next((el.get("href") for el in root.iter("link") if _is_canonical(el)), None)
    links = [href for a in root.iter("a") if (href := a.get("href"))]
    anchors = {
        text: ident for el in root.iter(*_HEADINGS) if (ident := el.get("id")) and (text := collapse(el.text_content()))
    }
    if extractor == "trafilatura":
        # trafilatura's own chrome rules (ids and classes such as menu, cookie, banner, breadcrumbs, related,
        # newsletter), applied to the page before it reads it: its extraction applies them, but when that
        # finds little (a page whose content is its title), its rescue reads every paragraph of the page as it
        # came, and the cookie banner and the newsletter box were that page's passages. The reader's fallback
        # reads the pruned page too.
        for discard in OVERALL_DISCARD_XPATH:
            for element in discard(root):
                element.drop_tree()
        for element in [el for el in root.iter("p", "div") if _links_only(el)]:
            element.drop_tree()
        raw = lxml.html.tostring(root)
        # Its HTML, not its Markdown: the Markdown puts code fences inside list items, where they swallow the
        # headings after them (8 of 100 pages lost headings so); the HTML keeps h1-h6, lists and tables for
        # the HTML reader to read as it reads any page.
        content = trafilatura.extract(
            raw, output_format="html", include_formatting=True, include_tables=True, include_comments=False
        )
        if content and content.strip():
            blocks = read_html(content.encode())
            if blocks:
                return Extracted(blocks, title, canonical, links, anchors, "trafilatura")
    # The reader: chosen, or trafilatura found no main content (a page of one short table, a list of links).
    return Extracted(read_html(raw, charset), title, canonical, links, anchors, "reader")


def _is_canonical(el: Any) -> bool:
    return "canonical" in (el.get("rel") or "").lower().split() and bool(el.get("href"))


def _links_only(el: Any) -> bool:
    """A paragraph or box whose every word is a link's (a site name, "Print this page", a row of links):
    navigation, as link density 1 says to boilerplate detectors. Not a list or a table: a list of links in the
    content ("See also") is the content's."""
    if next(el.iter("ul", "ol", "table"), None) is not None:
        return False
    text = collapse(el.text_content())
    return bool(text) and collapse(" ".join(a.text_content() for a in el.iter("a"))) == text
