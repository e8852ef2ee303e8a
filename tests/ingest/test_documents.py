"""The format readers on real files: HTML and DOCX written at test time (here and by python-docx), PDFs
printed by headless Chromium (tests/ingest/documents_support.py), each read back into the blocks the chunker cuts.

The no-outline PDF is the hard case the issue names: running headers and footers on every page, words
hyphenated at line ends, headings only by font size. The test first proves the file really has each of
those (from pdfminer's plain text), then that the reader removed or used them."""

from __future__ import annotations

import re
from collections.abc import AsyncIterator
from io import BytesIO
from pathlib import Path

import pytest
import pytest_asyncio
from pdfminer.high_level import extract_text
from pdfminer.pdfdocument import PDFDocument, PDFNoOutlines
from pdfminer.pdfparser import PDFParser

from provenance.errors import UnreadableDocument
from provenance.ingest.chunking import Chunk, chunk_blocks
from provenance.ingest.documents.blocks import Block
from provenance.ingest.documents.pdf import _join, _Line
from provenance.ingest.documents.read import read_document
from provenance.settings import REPO_ROOT
from tests.ingest.documents_support import (
    CHROMIUM,
    encrypted_pdf,
    html_to_pdf,
    markdown_to_docx,
    markdown_to_html,
    scanned_pdf,
)

STORAGE = (REPO_ROOT / "corpus" / "05-storage-and-lockers.md").read_text()
# A table and a deeper heading, beside the corpus chapter's lists and paragraphs.
EXTRA = """
## Locker Prices

| Size | Price per month |
|---|---|
| Small | $8 |
| Standard | $14 |

### Deposits

A refundable key deposit of $20 is taken when a locker is issued.
"""
MARKDOWN = STORAGE + EXTRA
COMPOUNDS = "<p>Woodworking is a four-<br>week course. Call the desk on (555) 014-<br>2290 to book a place.</p>"
SECTIONS = ["Lockers", "Project Shelves", "Large Project Bay", "Abandoned Items", "Bike Storage", "Locker Prices"]
WORD = re.compile(r"[a-z]+(?:-[a-z]+)*")
HYPHENATED_WORDS = ("woodshop", "membership", "flammables", "makerspace", "abandoned")


# Every reader's passages, with the whole heading path: the `###` is a passage of its own under its `##`.
PATHS = [f"Storage and Lockers > {s}" for s in SECTIONS] + ["Storage and Lockers > Locker Prices > Deposits"]
TABLE_ROWS = ["Size: Small, Price per month: $8.", "Size: Standard, Price per month: $14."]


def assert_heading_paths(chunks: list[Chunk], source: str) -> None:
    assert [c.heading for c in chunks] == PATHS
    assert chunks[-1].id == f"{source}#locker-prices--deposits"
    assert chunks[-1].text == "A refundable key deposit of $20 is taken when a locker is issued."
    assert chunks[-2].text == "\n".join(TABLE_ROWS)  # the table's rows, each a sentence naming its columns
    assert not any("Deposits" in c.text for c in chunks)  # a subheading is never a sentence of the text


def words(count_text: str) -> int:
    return len(count_text.split())


def headings(blocks: list[Block]) -> list[tuple[int, str]]:
    return [(b.level, b.text) for b in blocks if b.level]


def body(blocks: list[Block]) -> str:
    return "\n".join(b.text for b in blocks if not b.level)


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def printed(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[dict[str, Path]]:
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is not installed (`make chromium` installs Debian's package)")
    folder = tmp_path_factory.mktemp("printed")
    page = markdown_to_html(MARKDOWN)
    yield {
        "plain": await html_to_pdf(page, folder / "storage.pdf"),
        "outline": await html_to_pdf(page, folder / "storage-outline.pdf", outline=True, running=False),
        # Lines that end at a word's own hyphen, beside the chapter's hyphenation breaks.
        "compounds": await html_to_pdf(page.replace("</body>", COMPOUNDS + "</body>"), folder / "compounds.pdf"),
    }


def test_html_headings_lists_and_table_rows_without_the_page_around_them() -> None:
    page = markdown_to_html(MARKDOWN, title="Member Handbook", boilerplate=True)
    blocks = read_document("storage.html", page.encode())
    assert headings(blocks) == [(1, "Storage and Lockers")] + [(2, s) for s in SECTIONS] + [(3, "Deposits")]
    text = body(blocks)
    for chrome in ("Home", "Menu item", "analytics", "Related:", "Copyright", "font:"):
        assert chrome not in text  # header, nav, script, aside, footer and style are not passages
    lines = text.splitlines()
    assert "• A standard locker measures 30 cm by 45 cm by 90 cm and costs $14 per month." in lines
    assert all(row in lines for row in TABLE_ROWS)
    assert "measures" in text and "\u00ad" not in text  # the page's soft hyphens are gone

    chunks = chunk_blocks("storage.html", blocks, words)
    assert_heading_paths(chunks, "storage.html")
    assert all(c.pages is None for c in chunks)


def test_html_without_a_single_h1_takes_its_title_and_sections_from_the_page() -> None:
    page = b"<html><head><title>Rules</title></head><body><h1>Guests</h1><p>Bring one.</p><h1>Pets</h1><p>No pets.</p>"
    chunks = chunk_blocks("rules.htm", read_document("rules.htm", page), words)
    assert [(c.id, c.heading) for c in chunks] == [
        ("rules.htm#guests", "Rules > Guests"),
        ("rules.htm#pets", "Rules > Pets"),
    ]


def test_docx_heading_styles_lists_and_tables(tmp_path: Path) -> None:
    path = markdown_to_docx(MARKDOWN, tmp_path / "storage.docx")
    blocks = read_document("storage.docx", path.read_bytes())
    assert headings(blocks) == [(1, "Storage and Lockers")] + [(2, s) for s in SECTIONS] + [(3, "Deposits")]
    lines = body(blocks).splitlines()
    assert "• A large locker measures 60 cm by 60 cm by 90 cm and costs $22 per month." in lines
    assert all(row in lines for row in TABLE_ROWS)
    chunks = chunk_blocks("storage.docx", blocks, words)
    assert [c.id for c in chunks][:2] == ["storage.docx#lockers", "storage.docx#project-shelves"]
    assert_heading_paths(chunks, "storage.docx")


async def test_pdf_without_an_outline_headings_by_size_running_lines_and_hyphens_removed(
    printed: dict[str, Path],
) -> None:
    raw = printed["plain"].read_bytes()
    with pytest.raises(PDFNoOutlines):
        list(PDFDocument(PDFParser(BytesIO(raw))).get_outlines())
    plain = extract_text(BytesIO(raw))
    # What the file really holds: a header and a footer on every page, and words broken at line ends.
    assert plain.count("Foundry Commons Member Handbook") >= 3 and "Page 2 of" in plain
    broken = [line for line in plain.splitlines() if line.rstrip().endswith(("\u2010", "-"))]
    assert len(broken) >= 3, plain

    blocks = read_document("storage.pdf", raw)
    assert headings(blocks) == [(1, "Storage and Lockers")] + [(2, s) for s in SECTIONS] + [(3, "Deposits")]
    text = body(blocks)
    assert "Handbook" not in text and "Page " not in text
    assert "\u2010" not in text and not any(line.endswith("-") for line in text.splitlines())
    for word in HYPHENATED_WORDS:
        assert word in text
    # Every word broken at a line end reads whole again: no fragment ("measu", "res") is left, as every word
    # read is one the Markdown source has.
    assert set(WORD.findall(text.lower())) <= set(WORD.findall(MARKDOWN.lower()))
    assert "orange-tagged" in text  # a real compound keeps its hyphen
    # Chromium draws list markers as shapes, not text: each item is a list line again, as in the Markdown.
    assert "• A standard locker measures 30 cm by 45 cm by 90 cm and costs $14 per month." in text.splitlines()
    items = [line for line in text.splitlines() if line.startswith("• ")]
    assert items == [f"• {line[2:]}" for line in MARKDOWN.splitlines() if line.startswith("- ")]

    chunks = chunk_blocks("storage.pdf", blocks, words)
    # A PDF table prints as text lines, not cells: only the heading path is the other readers'.
    assert [c.heading for c in chunks] == PATHS
    assert chunks[-1].text == "A refundable key deposit of $20 is taken when a locker is issued."
    assert chunks[0].pages == (1, 1)
    assert all(c.pages is not None and c.pages[0] <= c.pages[1] for c in chunks)
    assert any(c.pages is not None and c.pages[0] < c.pages[1] for c in chunks)  # a passage across pages
    assert chunks[-1].pages is not None and chunks[-1].pages[1] == max(b.pages[1] for b in blocks if b.pages)


async def test_pdf_keeps_a_words_own_hyphen_at_a_line_end(printed: dict[str, Path]) -> None:
    raw = printed["compounds"].read_bytes()
    lines = [line.rstrip() for line in extract_text(BytesIO(raw)).splitlines()]
    assert "Woodworking is a four-" in lines and any(line.endswith("(555) 014-") for line in lines)
    assert any(line.endswith("\u2010") for line in lines)  # and breaks the printer made, marked as such
    text = body(read_document("compounds.pdf", raw))
    assert "Woodworking is a four-week course. Call the desk on (555) 014-2290 to book a place." in text
    assert "makerspace" in text


def test_pdf_line_end_hyphens_in_a_document_that_does_not_mark_its_breaks() -> None:
    """A typesetter that prints its breaks as plain hyphens: the document's own words decide."""

    def join(*texts: str, vocabulary: frozenset[str] = frozenset()) -> str:
        return _join([_Line(1, 0.0, 11.0, t) for t in texts], set(vocabulary))

    assert join("a mem-", "bership fee") == "a membership fee"
    assert join("an E-", "bike") == "an E-bike"
    assert join("an orange-", "tagged item", vocabulary=frozenset({"orange-tagged"})) == "an orange-tagged item"
    assert join("call (555) 014-", "2290") == "call (555) 014-2290"
    assert join("pages 2 -", "3") == "pages 2 - 3"  # a dash, not a broken number
    # Where the document prints its own breaks as U+2010, a plain hyphen is the word's.
    assert _join([_Line(1, 0.0, 11.0, "a four-"), _Line(1, 0.0, 11.0, "week course")], set(), True) == (
        "a four-week course"
    )


async def test_pdf_outline_gives_the_headings(printed: dict[str, Path]) -> None:
    raw = printed["outline"].read_bytes()
    outline = [(level, title) for level, title, *_ in PDFDocument(PDFParser(BytesIO(raw))).get_outlines()]
    assert (2, "Lockers") in outline
    blocks = read_document("storage-outline.pdf", raw)
    assert headings(blocks) == [(1, "Storage and Lockers")] + [(2, s) for s in SECTIONS] + [(3, "Deposits")]
    assert "Bike Storage" not in body(blocks)  # a heading is not also a line of text
    assert [c.heading for c in chunk_blocks("storage-outline.pdf", blocks, words)] == PATHS


@pytest.mark.parametrize(
    ("name", "content", "reason"),
    [
        ("empty.pdf", b"", "empty"),
        ("notes.rtf", b"{\\rtf1 hello}", "not a format ingest reads (.rtf"),
        ("cut.docx", b"PK\x03\x04\x14\x00\x06\x00" + b"\x00" * 40, "corrupt or truncated Word file"),
        ("page.html", b"<html>\x00\x01\x02", "binary content"),
        ("fake.pdf", b"just some words", "not a PDF"),
    ],
)
def test_unreadable_files_say_why(name: str, content: bytes, reason: str) -> None:
    with pytest.raises(UnreadableDocument, match=reason.replace("(", r"\(").replace(".", r"\.")):
        read_document(name, content)


async def test_truncated_encrypted_and_scanned_pdfs_say_why(printed: dict[str, Path], tmp_path: Path) -> None:
    raw = printed["plain"].read_bytes()
    with pytest.raises(UnreadableDocument, match="truncated"):
        read_document("cut.pdf", raw[: len(raw) // 2])
    with pytest.raises(UnreadableDocument, match="encrypted PDF: it needs a password"):
        read_document("locked.pdf", encrypted_pdf(printed["plain"], tmp_path / "locked.pdf").read_bytes())
    scan = await scanned_pdf(tmp_path / "scan.pdf")
    with pytest.raises(UnreadableDocument, match="no text layer"):
        read_document("scan.pdf", scan.read_bytes())


def test_html_inline_elements_are_read_once() -> None:
    page = b"<html><body><p>Ask in <a href='https://x.example'>#help</a> first, in <b>bold</b>.</p></body></html>"
    assert body(read_document("help.html", page)).strip() == "Ask in #help first, in bold."
