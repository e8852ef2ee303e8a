"""Word (.docx), read with python-docx: paragraphs in the styles Word offers for headings (Title, Heading 1
to Heading 9, or a style based on one) are headings; list paragraphs (a List style, or numbering) are one
line each, bulleted "•"; a table is read row by row into sentences that name their columns (its first row
is the header). Everything else is a paragraph.
"""

from __future__ import annotations

import re
from typing import Any

import docx
from docx.enum.style import WD_STYLE_TYPE
from docx.table import Table
from docx.text.paragraph import Paragraph

from provenance.ingest.documents.blocks import BLANK, Block, bullet, collapse, rank_headings, table_sentences

_HEADING_STYLE = re.compile(r"^heading (\d)$", re.IGNORECASE)


def _heading_level(style: Any) -> int:
    """Title is above Heading 1 (it becomes the title when there is one); a custom style counts as the
    heading its definition is based on."""
    while style is not None:
        name = (style.name or "").strip()
        if name.lower() == "title":
            return 1
        match = _HEADING_STYLE.match(name)
        if match:
            return int(match.group(1)) + 1
        style = style.base_style
    return 0


class _Styles:
    """Each paragraph style's heading level and whether it is a list style, worked out once a style:
    `Paragraph.style` looks the style up in the styles part on every call, the slowest part of reading."""

    def __init__(self, document: Any) -> None:
        self.level: dict[str | None, int] = {}
        self.listing: set[str | None] = set()
        for style in document.styles:
            if style.type != WD_STYLE_TYPE.PARAGRAPH:
                continue
            ids = [style.style_id] + ([None] if style == document.styles.default(WD_STYLE_TYPE.PARAGRAPH) else [])
            for sid in ids:
                self.level[sid] = _heading_level(style)
                if (style.name or "").lower().startswith("list"):
                    self.listing.add(sid)

    def of(self, paragraph: Paragraph) -> tuple[int, bool]:
        """(heading level or 0, whether it is a list item)."""
        sid = paragraph._p.style  # the style id as the XML holds it; python-docx has no public accessor
        ppr = paragraph._p.pPr  # numbering, too, only through the XML
        numbered = ppr is not None and ppr.numPr is not None
        return self.level.get(sid, 0), sid in self.listing or numbered


def _table_rows(table: Table) -> list[Block]:
    """Row by row into sentences that name their columns (`blocks.table_sentences`); a Word table's first
    row is its header."""
    rows: list[list[str]] = []
    for row in table.rows:
        cells: list[str] = []
        for cell in row.cells:
            text = collapse(cell.text)
            # A merged cell repeats in every row or column it spans: once is enough.
            if not cells or text != cells[-1]:
                cells.append(text)
        if any(cells):
            rows.append(cells)
    if len(rows) < 2:
        return [Block(s) for s in table_sentences([], rows)]
    return [Block(s) for s in table_sentences(rows[0], rows[1:])]


def read_docx(path_or_stream: Any) -> list[Block]:
    document = docx.Document(path_or_stream)
    styles = _Styles(document)
    blocks: list[Block] = []
    in_list = False
    for item in document.iter_inner_content():
        if isinstance(item, Table):
            blocks += [BLANK, *_table_rows(item), BLANK]
            in_list = False
            continue
        level, listed = styles.of(item)
        text = item.text
        if level:
            if collapse(text):
                blocks += [BLANK, Block(collapse(text), level), BLANK]
            in_list = False
        elif listed:
            if not in_list:
                blocks.append(BLANK)
            blocks += [Block(bullet() + collapse(line)) for line in text.splitlines() if line.strip()]
            in_list = True
        else:
            if in_list:
                blocks.append(BLANK)
            blocks += [Block(collapse(line)) for line in text.splitlines() if line.strip()]
            blocks.append(BLANK)
            in_list = False
    title = collapse(document.core_properties.title or "") or None
    return rank_headings(blocks, title)
