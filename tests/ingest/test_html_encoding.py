"""An HTML page's encoding (ingest.documents.html.parse_html): the server's charset, else the page's own
<meta charset>, else UTF-8 when the bytes are UTF-8, else Windows-1252. lxml's own fallback is Latin-1, which
read every UTF-8 apostrophe of a page without a meta charset as three characters."""

from __future__ import annotations

import pytest

from provenance.errors import UnreadableDocument
from provenance.ingest.documents.html import read_html

SENTENCE = "They’re paid breaks — café hours are 9–5."


def page(body: str, head: str = "") -> str:
    return (
        f"<html><head>{head}<title>Breaks</title></head><body><main><h1>Breaks</h1><p>{body}</p></main></body></html>"
    )


def text(raw: bytes, charset: str | None = None) -> str:
    return " ".join(b.text for b in read_html(raw, charset))


def test_utf8_without_a_meta_charset_is_read_as_utf8() -> None:
    assert SENTENCE in text(page(SENTENCE).encode("utf-8"))


def test_windows_1252_without_a_meta_charset_is_read_as_windows_1252() -> None:
    assert SENTENCE in text(page(SENTENCE).encode("cp1252"))


def test_the_pages_own_meta_charset_is_honoured() -> None:
    assert SENTENCE in text(page(SENTENCE, '<meta charset="windows-1252">').encode("cp1252"))
    http_equiv = '<meta http-equiv="Content-Type" content="text/html; charset=utf-8">'
    assert SENTENCE in text(page(SENTENCE, http_equiv).encode("utf-8"))


def test_the_servers_charset_outranks_the_page_and_an_unknown_one_is_ignored() -> None:
    raw = page(SENTENCE, '<meta charset="iso-8859-1">').encode("utf-8")
    assert SENTENCE in text(raw, "utf-8")
    assert SENTENCE in text(page(SENTENCE).encode("utf-8"), "no-such-charset")


def test_binary_content_is_still_refused() -> None:
    with pytest.raises(UnreadableDocument):
        read_html(b"\x00\x01" + page(SENTENCE).encode())
