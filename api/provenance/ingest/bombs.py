"""What a file would become once read, bounded before any reader opens it: a DOCX's members as unzipped, a
PDF's streams as inflated and its page count. A few kilobytes can inflate to gigabytes (a zip bomb, a PDF
whose one stream is a gigabyte of zeros), and the readers would hold it all; these checks read at most the
bound of each and say why a file is refused, or None."""

from __future__ import annotations

import io
import re
import zipfile
import zlib

from msgspec import Struct

# A PDF stream's data: between `stream` and `endstream` (PDF 32000-1 §7.3.8).
_STREAM = re.compile(rb"stream\r?\n(.*?)endstream", re.DOTALL)
_PAGE = re.compile(rb"/Type\s*/Page(?![A-Za-z])")


class Bounds(Struct, frozen=True):
    expanded_bytes: int  # what a file may inflate to, all told
    ratio: int  # inflated size over stored size, a zip's members or a PDF's streams
    pdf_pages: int


def docx_refusal(data: bytes, bounds: Bounds) -> str | None:
    try:
        members = zipfile.ZipFile(io.BytesIO(data)).infolist()
    except (zipfile.BadZipFile, ValueError) as exc:
        return f"the DOCX is not a readable zip ({exc})"
    # The sizes a zip declares are what an honest unzip writes; a member that writes more than it declares
    # fails its CRC check in the reader, which stops there.
    total = sum(m.file_size for m in members)
    if total > bounds.expanded_bytes:
        return f"the DOCX unzips to {total:,} bytes; the limit is {bounds.expanded_bytes:,} (UPLOAD_MAX_EXPANDED_BYTES)"
    stored = max(1, sum(m.compress_size for m in members))
    if total > 1_000_000 and total / stored > bounds.ratio:
        return (
            f"the DOCX unzips to {total / stored:,.0f} times its size; the limit is {bounds.ratio} (UPLOAD_MAX_RATIO)"
        )
    return None


def pdf_refusal(data: bytes, bounds: Bounds) -> str | None:
    """A PDF whose streams inflate past the bounds, or that has more pages than PDF_PAGES. Only Flate streams
    are inflated here (the filter nearly every PDF uses, and the one bombs use); each is inflated at most to
    what is left of the bound, so the check itself stays within it."""
    left = bounds.expanded_bytes
    stored = 0
    for match in _STREAM.finditer(data):
        raw = match.group(1)
        inflater = zlib.decompressobj()
        try:
            inflated = inflater.decompress(raw, left + 1)
        except zlib.error:
            continue  # not Flate (an image's DCT, or uncompressed): read as it is stored
        stored += len(raw)
        left -= len(inflated)
        if left < 0 or inflater.unconsumed_tail:
            return (
                f"the PDF's streams inflate to more than {bounds.expanded_bytes:,} bytes "
                "(UPLOAD_MAX_EXPANDED_BYTES): a decompression bomb, or a document too large to read"
            )
    inflated_total = bounds.expanded_bytes - left
    if inflated_total > 1_000_000 and inflated_total / max(1, stored) > bounds.ratio:
        return (
            f"the PDF's streams inflate to {inflated_total / stored:,.0f} times their size; the limit is {bounds.ratio}"
        )
    pages = len(_PAGE.findall(data))
    if pages > bounds.pdf_pages:
        return f"the PDF has {pages:,} pages; the limit is {bounds.pdf_pages:,} (UPLOAD_MAX_PDF_PAGES)"
    return None
