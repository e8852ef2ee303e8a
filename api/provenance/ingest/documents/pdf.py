"""PDF, read from its text layer with pdfminer.six, one page at a time, keeping each line's page.

How a page's text becomes blocks:
- Lines are the characters that share a baseline, left to right. The reading order is one column, top to
  bottom: a two-column layout reads across both columns (a known limit).
- Running headers and footers are removed: a line among the top or bottom two of its page whose text,
  digits aside, recurs there on at least half the pages (and on two or more), or that is only a page number
  ("12", "Page 3 of 40", "iv").
- Headings come from the outline (bookmarks) when the file has one: each entry's title is found on the
  page it points to (an entry whose title isn't printed there starts its section at the top of that page).
  Without an outline, font size decides: the body size is the size most characters are set in, and a short
  line (at most 20 words) set at least 15% larger is a heading, the largest size ranking highest (four
  sizes at most); consecutive lines of one heading size are one heading.
- A paragraph ends where the gap to the next line is over 1.3 times the body's usual line spacing, where
  the size changes, at a bullet, or at a page break after a line that ends a sentence. A bullet is a
  bullet character starting the line, or a small dot or square drawn just left of its first word (how
  browsers print list markers: a shape, not text); either way the line becomes a "•" list line.
- A word hyphenated at a line end is joined again. A printed break (U+2010, or a soft hyphen) is always
  dropped. A plain hyphen-minus at a line end is the word's own ("four-" + "week") in a document that
  prints its breaks as U+2010 or soft hyphens (a browser's print does); in other documents it stays after
  one or two letters ("E-bike") and where the document writes the compound with a hyphen elsewhere
  ("orange-tagged") and never without, and is dropped otherwise. A hyphen before a digit ("014-" +
  "2290") always stays, with no space.

Pages are the file's own page numbers, counted from 1, which is what a PDF viewer's page box takes; the
printed page labels (roman numerals for a preface, say) may differ.
"""

from __future__ import annotations

import itertools
import math
import re
import statistics
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from io import BytesIO
from typing import Any

from pdfminer.converter import PDFPageAggregator
from pdfminer.layout import LTChar, LTCurve, LTFigure, LTPage
from pdfminer.pdfdocument import PDFDocument, PDFEncryptionError, PDFNoOutlines, PDFPasswordIncorrect
from pdfminer.pdfinterp import PDFPageInterpreter, PDFResourceManager
from pdfminer.pdfpage import PDFPage
from pdfminer.pdfparser import PDFParser
from pdfminer.pdftypes import PDFObjRef, resolve1
from pdfminer.psparser import PSLiteral
from pdfminer.utils import decode_text

from provenance.errors import UnreadableDocument
from provenance.ingest.documents.blocks import BLANK, Block, collapse, rank_headings
from provenance.ingest.documents.blocks import bullet as list_marker

HEADING_RATIO = 1.15
HEADING_MAX_WORDS = 20
HEADING_SIZES = 4
PARAGRAPH_GAP = 1.3
EDGE_LINES = 2  # how many lines at a page's top and bottom may be running headers or footers
_PAGE_NUMBER = re.compile(r"^[-–—\s]*(page\s*)?([0-9]+|[ivxlcdm]+)(\s*(of|/)\s*[0-9]+)?[-–—\s]*$", re.IGNORECASE)
_BULLET = re.compile(r"^[•◦▪‣●○■□–*]\s+")
_LIGATURES = str.maketrans({"ﬀ": "ff", "ﬁ": "fi", "ﬂ": "fl", "ﬃ": "ffi", "ﬄ": "ffl", "ﬅ": "st", "ﬆ": "st"})
# U+2010 is what Chromium (Skia) prints at a hyphenated line end; U+00AD is a soft hyphen left in the text.
_LINE_END_HYPHEN = re.compile(r"([A-Za-z]+)[-\u2010\u00ad]$")
_WORD = re.compile(r"[A-Za-z]+(?:[-\u2010][A-Za-z]+)*")
_PRINTED_BREAK = ("\u2010", "\u00ad")
_NUMBER_BREAK = re.compile(r"\S[-\u2010]$")  # a hyphen at a line end, not a dash set apart by a space
# A drawn list marker, measured against the line's type size: at most this wide and high, at least this
# far from a hair line, and no further left of the line's first character than this.
MARKER_MAX, MARKER_MIN, MARKER_GAP = 0.6, 0.1, 2.0
MARKER_LARGEST = 24.0  # points: no marker is larger, whatever the type size


@dataclass
class _Line:
    page: int
    baseline: float  # larger is higher on the page, as PDF measures
    size: float
    text: str
    heading: int = 0
    dropped: bool = False


# The most one PDF's reading may take: a page whose content is built to be slow to lay out (millions of tiny
# glyphs) stops the read there rather than holding the ingest, and the file is refused with this reason.
READ_SECONDS = 120.0


def read_pdf(raw: bytes, max_seconds: float = READ_SECONDS) -> list[Block]:
    # pdfminer reads what it can of a damaged file without complaint; a file cut short must not become a
    # corpus quietly missing its last pages, so its end is checked first.
    if not raw.lstrip()[:1024].startswith(b"%PDF-"):
        raise UnreadableDocument("not a PDF (no %PDF- header)")
    if b"%%EOF" not in raw[-2048:]:
        raise UnreadableDocument("truncated or corrupt PDF (no %%EOF at its end)")
    try:
        document = PDFDocument(PDFParser(BytesIO(raw)))
    except PDFPasswordIncorrect:
        raise UnreadableDocument("encrypted PDF: it needs a password") from None
    except PDFEncryptionError as exc:
        raise UnreadableDocument(f"encrypted PDF ({exc})") from None
    pages: list[list[_Line]] = []
    page_numbers: dict[Any, int] = {}
    deadline = time.monotonic() + max_seconds
    for number, (page, layout) in enumerate(_layouts(document), start=1):
        if time.monotonic() > deadline:
            raise UnreadableDocument(f"reading it took longer than {max_seconds:.0f} s (stopped at page {number})")
        page_numbers[page.pageid] = number
        pages.append(_page_lines(layout, number))
    if not any(pages):
        raise UnreadableDocument("no text layer (a scanned PDF?): run OCR on it first")
    _drop_running_lines(pages)
    outline = _outline(document, page_numbers)
    if outline:
        pages = _apply_outline(pages, outline)
    else:
        _font_headings([line for lines in pages for line in lines])
    return rank_headings(_blocks([line for lines in pages for line in lines if not line.dropped]), _title(document))


def _layouts(document: PDFDocument) -> Iterator[tuple[PDFPage, LTPage]]:
    """Each page with its characters. One resource manager per document: it caches fonts by object number,
    which another file reuses for other fonts."""
    resources = PDFResourceManager(caching=True)
    # No layout analysis (laparams=None): the characters with their positions are all we need, and
    # grouping them by baseline here is several times faster than pdfminer's text boxes.
    device = PDFPageAggregator(resources, laparams=None)
    interpreter = PDFPageInterpreter(resources, device)
    for page in PDFPage.create_pages(document):
        interpreter.process_page(page)
        yield page, device.get_result()


def _chars(container: Any) -> Iterator[LTChar]:
    for item in container:
        if isinstance(item, LTChar):
            yield item
        elif isinstance(item, LTFigure):
            yield from _chars(item)


def _shapes(container: Any) -> Iterator[LTCurve]:
    """The drawn shapes (paths and rectangles; LTRect and LTLine are kinds of LTCurve)."""
    for item in container:
        if isinstance(item, LTCurve):
            yield item
        elif isinstance(item, LTFigure):
            yield from _shapes(item)


def _is_marker(shape: LTCurve, first: LTChar) -> bool:
    """Whether `shape` is a list marker drawn for the line that starts with `first`: small, about square,
    just left of the first character, and within the line's height."""
    size = max(first.size, 1.0)
    w, h = shape.width, shape.height
    if not (MARKER_MIN * size <= min(w, h) and max(w, h) <= MARKER_MAX * size and abs(w - h) <= 0.25 * max(w, h)):
        return False
    if not (0 <= first.x0 - shape.x1 <= MARKER_GAP * size):
        return False
    middle = (shape.y0 + shape.y1) / 2
    return first.y0 <= middle <= first.y0 + size


def _page_lines(page: LTPage, number: int) -> list[_Line]:
    shapes = [s for s in _shapes(page) if max(s.width, s.height) <= MARKER_LARGEST]
    chars = sorted(_chars(page), key=lambda c: (-c.y0, c.x0))
    groups: list[list[LTChar]] = []
    for char in chars:
        if groups and abs(groups[-1][0].y0 - char.y0) <= 0.5 * max(char.size, 1.0):
            groups[-1].append(char)
        else:
            groups.append([char])
    lines = []
    for group in groups:
        group.sort(key=lambda c: c.x0)
        text = _line_text(group)
        if text and not _BULLET.match(text) and any(_is_marker(s, group[0]) for s in shapes):
            text = "\u2022 " + text
        if text:
            sizes = Counter(round(c.size * 2) / 2 for c in group if not c.get_text().isspace())
            lines.append(_Line(number, group[0].y0, sizes.most_common(1)[0][0] if sizes else 0.0, text))
    return lines


def _line_text(chars: list[LTChar]) -> str:
    out: list[str] = []
    previous: LTChar | None = None
    for i, char in enumerate(chars):
        text = char.get_text()
        if text.isspace():
            following = chars[i + 1] if i + 1 < len(chars) else None
            # Chromium prints each unbroken soft hyphen as a space glyph that doesn't advance: not a word break.
            if following is not None and following.x0 < char.x0 + char.width / 2:
                continue
            out.append(" ")
        else:
            # Words set without space glyphs are told apart by the gap between them.
            if previous is not None and out and not out[-1].isspace() and char.x0 - previous.x1 > 0.2 * char.size:
                out.append(" ")
            out.append(text)
        previous = char
    return collapse("".join(out).translate(_LIGATURES))


def _running_key(text: str) -> str:
    return re.sub(r"\d+", "#", text.lower())


def _edges(lines: list[_Line]) -> list[_Line]:
    return lines if len(lines) <= 2 * EDGE_LINES else lines[:EDGE_LINES] + lines[-EDGE_LINES:]


def _drop_running_lines(pages: list[list[_Line]]) -> None:
    seen: Counter[str] = Counter()
    for lines in pages:
        seen.update({_running_key(line.text) for line in _edges(lines)})
    needed = max(2, math.ceil(len(pages) / 2))
    for lines in pages:
        for line in _edges(lines):
            if seen[_running_key(line.text)] >= needed or _PAGE_NUMBER.match(line.text):
                line.dropped = True


def _outline(document: PDFDocument, page_numbers: dict[Any, int]) -> list[tuple[int, str, int]]:
    """(depth from 1, title, page) of each outline entry that points at a page."""
    try:
        entries = list(document.get_outlines())
    except PDFNoOutlines:
        return []
    except Exception:  # a malformed outline is no reason to lose the text: font sizes decide
        return []
    found = []
    for level, title, dest, action, _ in entries:
        page = _destination_page(document, dest, action, page_numbers)
        text = collapse(title or "")
        if page is not None and text:
            found.append((int(level), text, page))
    return found


def _destination_page(document: PDFDocument, dest: Any, action: Any, page_numbers: dict[Any, int]) -> int | None:
    action = resolve1(action)
    if dest is None and isinstance(action, dict):
        kind = action.get("S")
        if isinstance(kind, PSLiteral) and kind.name == "GoTo":
            dest = action.get("D")
    dest = resolve1(dest)
    if isinstance(dest, PSLiteral):
        dest = dest.name
    if isinstance(dest, str | bytes):
        try:
            dest = resolve1(document.get_dest(dest))
        except Exception:  # a name with no destination: the entry is skipped
            return None
    if isinstance(dest, dict):
        dest = resolve1(dest.get("D"))
    if isinstance(dest, list) and dest and isinstance(dest[0], PDFObjRef):
        return page_numbers.get(dest[0].objid)
    return None


def _comparable(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def _apply_outline(pages: list[list[_Line]], outline: list[tuple[int, str, int]]) -> list[list[_Line]]:
    """Mark each entry's printed title as its heading; an entry whose title isn't on its page becomes a
    heading at the top of that page."""
    cursor = [0] * len(pages)
    inserted: list[list[_Line]] = [[] for _ in pages]
    for level, title, page in outline:
        lines = pages[page - 1]
        found = _find_title(lines, cursor[page - 1], _comparable(title))
        if found is None:
            inserted[page - 1].append(_Line(page, math.inf, 0.0, title, heading=level))
            continue
        first, last = found
        lines[first].text, lines[first].heading = title, level
        for wrapped in lines[first + 1 : last + 1]:
            wrapped.dropped = True
        cursor[page - 1] = last + 1
    return [added + lines for added, lines in zip(inserted, pages, strict=True)]


def _find_title(lines: list[_Line], start: int, want: str) -> tuple[int, int] | None:
    """The first run of up to three lines from `start` that reads `want` (a title may wrap)."""
    for first in range(start, len(lines)):
        joined = ""
        for last in range(first, min(first + 3, len(lines))):
            if lines[last].dropped:
                break
            joined += _comparable(lines[last].text)
            if joined == want:
                return first, last
            if not want.startswith(joined):
                break
    return None


def _font_headings(lines: list[_Line]) -> None:
    weight: Counter[float] = Counter()
    for line in lines:
        if not line.dropped:
            weight[line.size] += len(line.text)
    if not weight:
        return
    body = weight.most_common(1)[0][0]

    def short(line: _Line) -> bool:
        return len(line.text.split()) <= HEADING_MAX_WORDS

    sizes = {line.size for line in lines if not line.dropped and line.size >= body * HEADING_RATIO and short(line)}
    levels = {size: i + 1 for i, size in enumerate(sorted(sizes, reverse=True)[:HEADING_SIZES])}
    previous: _Line | None = None
    for line in lines:
        if line.dropped:
            continue  # a running header between a heading's two lines doesn't end it
        level = levels.get(line.size) if short(line) else None
        if level is None:
            previous = None
        elif previous is not None and previous.page == line.page and previous.size == line.size:
            previous.text += " " + line.text  # a heading that wraps onto the next line
            line.dropped = True
        else:
            line.heading, previous = level, line


def _blocks(lines: list[_Line]) -> list[Block]:
    vocabulary: set[str] = set()
    for line in lines:
        vocabulary.update(w.lower().replace("\u2010", "-") for w in _WORD.findall(line.text))
    marks_breaks = any(line.text.endswith(_PRINTED_BREAK) for line in lines)
    spacing = _line_spacing(lines)
    blocks: list[Block] = []
    paragraph: list[_Line] = []

    def flush(blank: bool = True) -> None:
        if paragraph:
            text = _join(paragraph, vocabulary, marks_breaks)
            blocks.append(Block(text, 0, (paragraph[0].page, paragraph[-1].page)))
            if blank:
                blocks.append(BLANK)
            paragraph.clear()

    for line in lines:
        if line.heading:
            flush()
            blocks.extend([Block(line.text, line.heading, (line.page, line.page)), BLANK])
            continue
        bullet = _BULLET.match(line.text)
        if bullet:
            line.text = list_marker() + line.text[bullet.end() :]
        if paragraph and (bullet or _breaks(paragraph[-1], line, spacing)):
            # The items of one list are lines of one paragraph, as Markdown writes them and the other
            # readers give them.
            flush(blank=not (bullet and paragraph[0].text.startswith(list_marker())))
        paragraph.append(line)
    flush()
    return blocks


def _line_spacing(lines: list[_Line]) -> float:
    gaps = [
        a.baseline - b.baseline
        for a, b in itertools.pairwise(lines)
        if a.page == b.page and not a.heading and not b.heading and a.size == b.size and a.baseline > b.baseline
    ]
    return statistics.median(gaps) if gaps else math.inf


def _breaks(last: _Line, line: _Line, spacing: float) -> bool:
    if last.page != line.page:
        return last.text.rstrip().endswith((".", "!", "?", ":"))
    return last.baseline - line.baseline > spacing * PARAGRAPH_GAP or abs(last.size - line.size) > 0.5


def _join(lines: list[_Line], vocabulary: set[str], marks_breaks: bool = False) -> str:
    text = lines[0].text
    for line in lines[1:]:
        end = _LINE_END_HYPHEN.search(text)
        start = re.match(r"[a-z]+", line.text)
        if end and start:
            left, right = end.group(1), start.group(0)
            keep = _keeps_hyphen(text[-1], left, right, vocabulary, marks_breaks)
            text = text[: end.end(1)] + ("-" if keep else "") + line.text
        elif _NUMBER_BREAK.search(text) and line.text[:1].isdigit():
            text = text[:-1] + "-" + line.text  # no word is hyphenated before a digit: "014-" "2290"
        else:
            text += " " + line.text
    return text


def _keeps_hyphen(hyphen: str, left: str, right: str, vocabulary: set[str], marks_breaks: bool = False) -> bool:
    """Whether a hyphen at a line end belongs to the word. A printed hyphenation break (U+2010, as Chromium
    writes it, or a soft hyphen) never does. A plain hyphen-minus does in a document that `marks_breaks`
    (prints its hyphenation breaks as U+2010 or soft hyphens: a hyphen-minus there is a word's own, broken
    after as any hyphen may be: "four-" "week"). Elsewhere it may be either: it stays after a letter or two
    ("E-bike", "X-ray"), or where the document writes the compound ("orange-tagged") and never the joined
    word."""
    if hyphen != "-":
        return False
    if marks_breaks or len(left) <= 2:
        return True
    return f"{left}-{right}".lower() in vocabulary and (left + right).lower() not in vocabulary


def _title(document: PDFDocument) -> str | None:
    for info in document.info:
        value = resolve1(info.get("Title"))
        if isinstance(value, bytes):
            value = decode_text(value)
        title = collapse(value) if isinstance(value, str) else ""
        # Printers often record the page's address or file name as its title: that is no title.
        if title and not re.search(r"://|^about:|\.(html?|pdf|docx?)$", title, re.IGNORECASE):
            return title
    return None
