"""HTML, as saved from a browser or exported by a CMS: `h1`-`h6` are headings, paragraphs and other blocks
are paragraphs, each list item and table row is a line of its own (cells joined by " | ").

What is around the content is not a passage: scripts, styles, navigation, asides, forms and hidden
elements are dropped everywhere. When the page marks its content (`main`, or a single `article`), only that
is read; otherwise the page's own `header` and `footer` (site banners, copyright lines) are dropped too,
while those inside an article or section stay (they hold its title and notes).
"""

from __future__ import annotations

from typing import Any

import lxml.html
from lxml import etree

from provenance.documents.blocks import BLANK, Block, collapse, rank_headings
from provenance.errors import UnreadableDocument

_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_DROP = {"script", "style", "noscript", "template", "nav", "aside", "form", "svg", "iframe", "button", "select"}
_DROP_ROLES = {"navigation", "banner", "contentinfo", "complementary", "search"}
_PAGE_CHROME = {"header", "footer"}
_BLOCKS = {
    "p", "div", "section", "article", "main", "body", "blockquote", "pre", "ul", "ol", "dl", "dt", "dd",
    "table", "figure", "figcaption", "caption", "details", "summary", "address",
    "fieldset", "hr", "header", "footer",
}  # fmt: skip


class _Walker:
    def __init__(self, drop_chrome: bool) -> None:
        self.drop_chrome = drop_chrome
        self.blocks: list[Block] = []
        self.line: list[str] = []

    def end_line(self, prefix: str = "") -> None:
        text = collapse("".join(self.line))
        self.line = []
        if text:
            self.blocks.append(Block(prefix + text))

    def end_paragraph(self) -> None:
        self.end_line()
        if self.blocks and self.blocks[-1] != BLANK:
            self.blocks.append(BLANK)

    def dropped(self, el: Any) -> bool:
        tag = el.tag
        if tag in _DROP or el.get("hidden") is not None or el.get("aria-hidden") == "true":
            return True
        if (el.get("role") or "") in _DROP_ROLES:
            return True
        return self.drop_chrome and tag in _PAGE_CHROME and not _inside_content(el)

    def walk(self, el: Any, list_kind: str | None = None, index: int = 0) -> None:
        if not isinstance(el.tag, str):  # a comment or processing instruction: only its tail is text
            self.line.append(el.tail or "")
            return
        tag = el.tag.lower()
        if self.dropped(el):
            pass
        elif tag in _HEADINGS:
            self.end_paragraph()
            text = collapse(el.text_content())
            if text:
                self.blocks += [Block(text, _HEADINGS[tag]), BLANK]
        elif tag == "br":
            self.end_line()
        elif tag == "li":
            self.end_line()
            self.children(el)
            self.end_line("- " if list_kind != "ol" else f"{index}. ")
        elif tag == "tr":
            self.end_line()
            cells = [collapse(c.text_content()) for c in el if isinstance(c.tag, str) and c.tag in ("td", "th")]
            if any(cells):
                self.blocks.append(Block(" | ".join(cells)))
        elif tag in _BLOCKS:
            self.end_paragraph()
            self.children(el, tag if tag in ("ul", "ol") else None)
            self.end_paragraph()
        else:
            self.line.append(el.text or "")
            self.children(el)
        self.line.append(el.tail or "")

    def children(self, el: Any, list_kind: str | None = None) -> None:
        if list_kind is None:
            self.line.append(el.text or "")
        index = 0
        for child in el:
            if child.tag == "li":
                index += 1
            self.walk(child, list_kind, index)


def _inside_content(el: Any) -> bool:
    return any(a.tag in ("article", "section", "main") for a in el.iterancestors())


def read_html(raw: bytes) -> list[Block]:
    if b"\x00" in raw[:4096]:
        raise UnreadableDocument("binary content, not HTML")
    try:
        # Bytes, not text: lxml honours the page's own <meta charset>.
        root = lxml.html.document_fromstring(raw)
    except (etree.ParserError, ValueError) as exc:
        raise UnreadableDocument(f"not readable as HTML ({exc})") from None
    title = collapse(root.findtext(".//title") or "") or None
    content = root.find(".//main")
    if content is None:
        articles = root.findall(".//article")
        content = articles[0] if len(articles) == 1 else root.find("body")
    walker = _Walker(drop_chrome=content is None or content.tag == "body")
    walker.walk(content if content is not None else root)
    walker.end_paragraph()
    return rank_headings(walker.blocks, title)
