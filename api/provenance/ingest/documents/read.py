"""One entry point for every format: the file's name picks the reader, and whatever makes a file
unreadable comes back as `UnreadableDocument` with a one-line reason."""

from __future__ import annotations

from io import BytesIO
from pathlib import PurePath

from provenance.errors import UnreadableDocument
from provenance.ingest.documents.blocks import Block
from provenance.ingest.documents.docx import read_docx
from provenance.ingest.documents.html import read_html
from provenance.ingest.documents.markdown import read_markdown
from provenance.ingest.documents.pdf import read_pdf

TEXT_SUFFIXES = (".md", ".markdown", ".txt")
SUFFIXES = (*TEXT_SUFFIXES, ".html", ".htm", ".docx", ".pdf")


def read_text(raw: bytes) -> str:
    if b"\x00" in raw:
        raise UnreadableDocument("binary content")
    try:
        return raw.decode("utf-8").lstrip("\ufeff")
    except UnicodeDecodeError as exc:
        raise UnreadableDocument(f"not valid UTF-8 (byte {exc.start})") from None


def read_document(name: str, raw: bytes) -> list[Block]:
    suffix = PurePath(name).suffix.lower()
    if suffix not in SUFFIXES:
        raise UnreadableDocument(f"not a format ingest reads ({suffix or 'no suffix'}; it reads {', '.join(SUFFIXES)})")
    if not raw.strip():
        raise UnreadableDocument("empty")
    if suffix in TEXT_SUFFIXES:
        return read_markdown(read_text(raw))
    try:
        if suffix == ".pdf":
            return read_pdf(raw)
        if suffix == ".docx":
            return read_docx(BytesIO(raw))
        return read_html(raw)
    except UnreadableDocument:
        raise
    except Exception as exc:  # parsers of damaged files raise anything; one bad file must not stop the rest
        kind = {".pdf": "PDF", ".docx": "Word file"}.get(suffix, "HTML")
        raise UnreadableDocument(f"corrupt or truncated {kind} ({type(exc).__name__}: {_first_line(exc)})") from None


def _first_line(exc: Exception) -> str:
    text = str(exc).strip().splitlines()
    return text[0][:120] if text else "no detail"
