"""HTML, as saved from a browser or exported by a CMS: `h1`-`h6` are headings, paragraphs and other blocks
are paragraphs, each list item is a line of its own, and a table is read row by row into sentences that
name their columns (`blocks.table_sentences`; the first row is the header).

What is around the content is not a passage: scripts, styles, navigation, asides, forms and hidden
elements are dropped everywhere. When the page marks its content (`main`, or a single `article`), only that
is read; otherwise the page's own `header` and `footer` (site banners, copyright lines) are dropped too,
while those inside an article or section stay (they hold its title and notes).
"""

from __future__ import annotations

import codecs
import re
from typing import Any

import lxml.html
from lxml import etree

from provenance.errors import UnreadableDocument
from provenance.ingest.documents.blocks import BLANK, Block, bullet, collapse, rank_headings, table_sentences

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
            self.end_line(bullet() if list_kind != "ol" else f"{index}. ")
        elif tag == "table":
            self.end_paragraph()
            self.blocks += [Block(s) for s in _table(el)]
            self.end_paragraph()
        elif tag in _BLOCKS:
            self.end_paragraph()
            self.children(el, tag if tag in ("ul", "ol") else None)
            self.end_paragraph()
        else:
            self.children(el)  # its text, then its children's (an inline element's text was read twice)
        self.line.append(el.tail or "")

    def children(self, el: Any, list_kind: str | None = None) -> None:
        if list_kind is None:
            self.line.append(el.text or "")
        index = 0
        for child in el:
            if child.tag == "li":
                index += 1
            self.walk(child, list_kind, index)


def _table(table: Any) -> list[str]:
    """The header is the first row (of `th` cells, in a `thead`, or, as in a Word table, simply first) when
    the table has rows below it."""
    rows = []
    for tr in table.iter("tr"):
        cells = [collapse(c.text_content()) for c in tr if isinstance(c.tag, str) and c.tag in ("td", "th")]
        if any(cells):
            rows.append(cells)
    if len(rows) < 2:
        return table_sentences([], rows)
    return table_sentences(rows[0], rows[1:])


def _inside_content(el: Any) -> bool:
    return any(a.tag in ("article", "section", "main") for a in el.iterancestors())


def read_html_fragment(html: str) -> list[Block]:
    """A fragment of HTML inside another document (a Markdown file's raw HTML block), read as a page's
    content is: its lists, tables and headings as such, comments and scripts dropped."""
    try:
        root = lxml.html.fragment_fromstring(html, create_parent="div")
    except (etree.ParserError, ValueError):
        return []
    walker = _Walker(drop_chrome=False)
    walker.walk(root)
    walker.end_paragraph()
    return walker.blocks


# A page that says its own encoding: <meta charset> or <meta http-equiv="Content-Type" content="...; charset=...">.
_META_CHARSET = re.compile(rb"<meta[^>]+charset", re.I)


def parse_html(raw: bytes, charset: str | None = None) -> Any:
    """A page as lxml's tree. Its encoding: `charset` (what the server's Content-Type said, which outranks the
    page), else the page's own <meta charset>, else UTF-8 when the bytes are UTF-8, else Windows-1252. lxml
    alone falls back to Latin-1, which turned every UTF-8 apostrophe of a crawled page without a meta charset
    into "â\x80\x99" (issue 46's crawled handbook)."""
    if b"\x00" in raw[:4096]:
        raise UnreadableDocument("binary content, not HTML")
    encoding = _codec(charset)
    if encoding is None and not _META_CHARSET.search(raw[:4096]):
        try:
            raw.decode("utf-8")
            encoding = "utf-8"
        except UnicodeDecodeError:
            encoding = "cp1252"
    try:
        if encoding is None:
            return lxml.html.document_fromstring(raw)  # lxml reads the page's <meta charset>
        return lxml.html.document_fromstring(raw, parser=lxml.html.HTMLParser(encoding=encoding))
    except (etree.ParserError, ValueError, LookupError) as exc:
        raise UnreadableDocument(f"not readable as HTML ({exc})") from None


def _codec(charset: str | None) -> str | None:
    if not charset:
        return None
    try:
        return codecs.lookup(charset.strip().strip('"')).name
    except LookupError:
        return None  # a name no codec answers to: as if none were given


def read_html(raw: bytes, charset: str | None = None) -> list[Block]:
    root = parse_html(raw, charset)
    title = collapse(root.findtext(".//title") or "") or None
    content = root.find(".//main")
    if content is None:
        articles = root.findall(".//article")
        content = articles[0] if len(articles) == 1 else root.find("body")
    walker = _Walker(drop_chrome=content is None or content.tag == "body")
    walker.walk(content if content is not None else root)
    walker.end_paragraph()
    return rank_headings(walker.blocks, title)
