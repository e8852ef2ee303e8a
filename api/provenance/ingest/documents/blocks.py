"""What every reader produces and the chunker consumes: a document as a flat list of blocks.

A block is a heading (level 1-6) or a line of body text; an empty body line ends a paragraph, as a blank
line does in Markdown. Readers of paged formats say which pages each block came from. The chunker's rules
(`#` is the title, `##` bounds a passage, deeper headings stay in their section) then apply to every
format alike.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

Pages = tuple[int, int]  # first and last page, 1-based, as the file numbers them (not its printed labels)
MAX_LEVEL = 6


@dataclass(frozen=True, slots=True)
class Block:
    text: str
    level: int = 0  # 0: a body line; 1-6: a heading
    pages: Pages | None = None


BLANK = Block("")


@dataclass(frozen=True)
class Document:
    blocks: list[Block]

    def as_markdown(self) -> str:
        """The document's outline as Markdown, for what reads titles and headings from text
        (`provenance.ingest.describe.describe`)."""
        return "\n".join(f"{'#' * b.level} {b.text}" if b.level else b.text for b in self.blocks)


def merge_pages(spans: Iterable[Pages | None]) -> Pages | None:
    known = [s for s in spans if s is not None]
    if not known:
        return None
    return min(s[0] for s in known), max(s[1] for s in known)


def rank_headings(blocks: Sequence[Block], title: str | None) -> list[Block]:
    """Map a document's heading levels onto the chunker's: a single top heading that comes first is the
    title (level 1) and the next level down bounds passages (level 2). Where the top level repeats (a web
    page of several `h1`s, a PDF whose largest type is every chapter's), those headings bound passages and
    `title` (the file's own, from its metadata) is the title. Levels are ranked, not copied, so a
    document that skips one (`h1` then `h3`) still has sections."""
    used = sorted({b.level for b in blocks if b.level})
    headings = [b for b in blocks if b.level]
    out = list(blocks)
    if not used:
        return ([Block(title, 1), BLANK] if title else []) + out
    top = used[0]
    single_title = headings[0].level == top and sum(1 for b in headings if b.level == top) == 1
    first = 1 if single_title else 2
    rank = {level: min(first + i, MAX_LEVEL) for i, level in enumerate(used)}
    ranked = [Block(b.text, rank[b.level], b.pages) if b.level else b for b in out]
    if not single_title and title:
        ranked = [Block(title, 1), BLANK, *ranked]
    return ranked


# A code block's lines in passage text: indented, as Markdown writes code, so it reads as code and
# `provenance.text.sentence_spans` keeps it whole.
CODE_INDENT = "    "
_BULLET = "• "


def bullet() -> str:
    """The marker a list item's line starts with in passage text: a reader's bullet, not Markdown's."""
    return _BULLET


def table_sentences(header: Sequence[str], rows: Iterable[Sequence[str]]) -> list[str]:
    """A table read row by row: each row one sentence naming its columns ("Day: Monday, Hours: 10."), so
    every cell is a fact with its header beside it. Empty cells are left out; a column without a header
    gives its cell alone. Commas, not semicolons: a claim is split at a semicolon, and "Salary: $73,500"
    alone would have lost the row it is the salary of."""
    out = []
    for row in rows:
        cells = []
        for n, cell in enumerate(row):
            cell = collapse(cell)
            if not cell:
                continue
            name = collapse(header[n]) if n < len(header) else ""
            cells.append(f"{name}: {cell}" if name and name != cell else cell)
        if not cells:
            continue
        sentence = ", ".join(cells)
        out.append(sentence if sentence[-1] in ".!?" else sentence + ".")
    return out


# Invisible in print and on screen, but they split words for search and embedding: soft hyphens (web pages
# use them for hyphenation), zero-width spaces and joiners, and the byte-order mark.
_INVISIBLE = dict.fromkeys(map(ord, "\u00ad\u200b\u200c\u200d\u2060\ufeff"))


def collapse(text: str) -> str:
    """One line of text as it reads: invisible characters removed, runs of whitespace one space."""
    return " ".join(text.translate(_INVISIBLE).split())
