"""Real PDF, HTML and DOCX files made from Markdown, for the reader tests, the format evals
(evals/formats.py) and the ingest benchmark (bench/ingest_formats.py).

Who writes what: HTML is written here (the subset of Markdown the corpus uses: `#` headings, paragraphs,
`- ` lists, `|` tables); PDF is that HTML printed by headless Chromium (Debian's package, driven by
playwright) in a narrow, hyphenated column with running headers and footers, with or without an outline;
DOCX is written by python-docx with Word's built-in Heading and List styles.
"""

from __future__ import annotations

import base64
import html
import io
import re
from pathlib import Path

import docx
import pypdf
from PIL import Image
from playwright.async_api import async_playwright

CHROMIUM = Path("/usr/bin/chromium")
# The machine has no internet: without these flags Chromium stalls on background network attempts.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-sync",
    "--disable-quic",
]
_HEADING = re.compile(r"^(#{1,6})\s+(.*)$")

# A narrow column with `hyphens: auto`, so Chromium breaks words at line ends (the reader must join them).
PRINT_CSS = """
body { font: 11pt/1.35 serif; width: 7cm; hyphens: auto; -webkit-hyphens: auto; text-align: justify; }
h1 { font-size: 22pt; } h2 { font-size: 16pt; } h3 { font-size: 13pt; }
h1, h2, h3 { hyphens: none; }
nav, header, footer, aside { font-size: 9pt; }
"""
HEADER = '<div style="font-size:8pt;width:100%;text-align:center">Foundry Commons Member Handbook</div>'
FOOTER = (
    '<div style="font-size:8pt;width:100%;text-align:center">Page <span class="pageNumber"></span>'
    ' of <span class="totalPages"></span></div>'
)


_LONG_WORD = re.compile(r"[A-Za-z]{8,}")


def _soft_hyphens(word: str) -> str:
    # Debian's Chromium has no hyphenation dictionaries offline (they are a downloaded component), so
    # `hyphens: auto` alone breaks nothing: soft hyphens inside long words let it break them at line ends,
    # printing a real hyphen there, as a typesetter's hyphenation would.
    return word[:3] + "".join(c + "\u00ad" for c in word[3:-3]) + word[-3:]


def _inline(text: str) -> str:
    return _LONG_WORD.sub(lambda m: _soft_hyphens(m.group(0)), html.escape(text, quote=False))


def markdown_to_html(markdown: str, *, title: str | None = None, boilerplate: bool = False) -> str:
    """A whole HTML page. With `boilerplate`, it carries what a saved web page does around the content
    (navigation, a script, a style, a header, a footer, an aside), none of which is a passage."""
    body: list[str] = []
    paragraph: list[str] = []
    items: list[str] = []
    rows: list[list[str]] = []

    def flush() -> None:
        if paragraph:
            body.append(f"<p>{_inline(' '.join(paragraph))}</p>")
            paragraph.clear()
        if items:
            body.append("<ul>" + "".join(f"<li>{_inline(i)}</li>" for i in items) + "</ul>")
            items.clear()
        if rows:
            cells = ["<tr>" + "".join(f"<td>{_inline(c)}</td>" for c in r) + "</tr>" for r in rows]
            body.append("<table>" + "".join(cells) + "</table>")
            rows.clear()

    for line in markdown.splitlines():
        stripped = line.strip()
        heading = _HEADING.match(stripped)
        if heading:
            flush()
            level = len(heading.group(1))
            body.append(f"<h{level}>{_inline(heading.group(2))}</h{level}>")
        elif stripped.startswith("- "):
            if paragraph:
                flush()
            items.append(stripped[2:])
        elif stripped.startswith("|"):
            cells = [c.strip() for c in stripped.strip("|").split("|")]
            if not all(set(c) <= set("-: ") for c in cells):
                rows.append(cells)
        elif stripped:
            paragraph.append(stripped)
        else:
            flush()
    flush()
    head = f"<title>{_inline(title)}</title>" if title else ""
    head += f"<style>{PRINT_CSS}</style>"
    if boilerplate:
        head += "<script>window.analytics = 'Ignore this script text';</script>"
        body.insert(0, '<header><a href="/">Home</a> | <a href="/about">About us</a></header>')
        body.insert(1, "<nav><ul><li>Menu item one</li><li>Menu item two</li></ul></nav>")
        body.append("<aside>Related: other handbooks you may like</aside>")
        body.append("<footer>Copyright 2024 Foundry Commons. All rights reserved.</footer>")
    return (
        f'<!doctype html><html lang="en"><head><meta charset="utf-8">{head}</head><body>{"".join(body)}</body></html>'
    )


async def html_to_pdf(page_html: str, out: Path, *, outline: bool = False, running: bool = True) -> Path:
    """Print `page_html` with Chromium: A5 pages, a running header and a "Page N of M" footer, and a
    document outline (bookmarks from the headings) only when asked."""
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        try:
            page = await browser.new_page()
            await page.set_content(page_html)
            await page.pdf(
                path=str(out),
                format="A5",
                display_header_footer=running,
                header_template=HEADER if running else "<span></span>",
                footer_template=FOOTER if running else "<span></span>",
                margin={"top": "1.5cm", "bottom": "1.5cm", "left": "1cm", "right": "1cm"},
                outline=outline,
                tagged=outline,
            )
        finally:
            await browser.close()
    return out


def markdown_to_docx(markdown: str, out: Path) -> Path:
    """A Word file with the built-in styles a writer picks: Title/Heading N, List Bullet, a table grid."""
    document = docx.Document()
    paragraph: list[str] = []
    rows: list[list[str]] = []

    def flush() -> None:
        if paragraph:
            document.add_paragraph(" ".join(paragraph))
            paragraph.clear()
        if rows:
            table = document.add_table(rows=len(rows), cols=max(len(r) for r in rows))
            for r, row in enumerate(rows):
                for c, cell in enumerate(row):
                    table.cell(r, c).text = cell
            rows.clear()

    for line in markdown.splitlines():
        stripped = line.strip()
        heading = _HEADING.match(stripped)
        if heading:
            flush()
            document.add_heading(heading.group(2), level=len(heading.group(1)))
        elif stripped.startswith("- "):
            flush()
            document.add_paragraph(stripped[2:], style="List Bullet")
        elif stripped.startswith("|"):
            if paragraph:
                flush()
            cells = [c.strip() for c in stripped.strip("|").split("|")]
            if not all(set(c) <= set("-: ") for c in cells):
                rows.append(cells)
        elif stripped:
            paragraph.append(stripped)
        else:
            flush()
    flush()
    document.save(str(out))
    return out


def encrypted_pdf(source: Path, out: Path) -> Path:
    """`source` encrypted with a user password (AES-128, by pypdf): it can't be opened without it."""
    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(source))
    writer.encrypt(user_password="secret", owner_password="owner", algorithm="AES-128")
    writer.write(out)
    return out


async def scanned_pdf(out: Path) -> Path:
    """A page that is only a picture of text, as a scanner makes it: Chromium prints an image, no text layer."""
    picture = Image.new("L", (600, 200), 255)
    picture.paste(0, (40, 80, 560, 96))  # a dark bar where a line of text would be
    buffer = io.BytesIO()
    picture.save(buffer, format="PNG")
    data = base64.b64encode(buffer.getvalue()).decode()
    page = f'<!doctype html><html><body><img src="data:image/png;base64,{data}" width="500"></body></html>'
    return await html_to_pdf(page, out, running=False)
