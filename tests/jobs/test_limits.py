"""Bad uploads against a real Postgres and the real worker: DOCX zip bombs, PDF decompression bombs, PDFs of
10,000 pages, encrypted, corrupt and empty files, and an upload past CORPUS_MAX_PASSAGES are each refused
with a reason, the good file beside them goes in, and the corpus is otherwise unchanged."""

from __future__ import annotations

import io
import zipfile
import zlib
from collections.abc import AsyncIterator
from pathlib import Path

import pypdf
import pytest
import pytest_asyncio

from provenance.ingest.bombs import Bounds, docx_refusal, pdf_refusal
from provenance.jobs.queue import JobStore
from provenance.jobs.worker import Worker, kept_name
from provenance.services import load_embedder
from provenance.settings import Settings
from provenance.store.sources import SourceStore
from tests.reliability.support import migrated_schema

BOUNDS = Bounds(expanded_bytes=10_000_000, ratio=100, pdf_pages=2000)
GOOD = b"# Lockers\n\n## Keys\n\nLocker keys are issued by the facilities desk for a deposit of ten dollars.\n"


def zip_bomb(size: int) -> bytes:
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("[Content_Types].xml", "<Types/>")
        with z.open("word/document.xml", "w") as member:
            for _ in range(size // 1_000_000):
                member.write(b"\0" * 1_000_000)
    return out.getvalue()


def pdf_with(objects: list[bytes]) -> bytes:
    body = b"%PDF-1.4\n" + b"".join(b"%d 0 obj\n%s\nendobj\n" % (n + 1, o) for n, o in enumerate(objects))
    return body + b"trailer\n<< /Root 1 0 R >>\n%%EOF\n"


def stream_bomb(size: int) -> bytes:
    data = zlib.compress(b"\0" * size, 9)
    return pdf_with(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [3 0 R] /Count 1 >>",
            b"<< /Type /Page /Parent 2 0 R /Contents 4 0 R >>",
            b"<< /Length %d /Filter /FlateDecode >>\nstream\n%s\nendstream" % (len(data), data),
        ]
    )


def many_pages(pages: int) -> bytes:
    kids = b" ".join(b"%d 0 R" % (n + 3) for n in range(pages))
    return pdf_with(
        [b"<< /Type /Catalog /Pages 2 0 R >>", b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, pages)]
        + [b"<< /Type /Page /Parent 2 0 R >>"] * pages
    )


def encrypted_pdf() -> bytes:
    writer = pypdf.PdfWriter()
    writer.add_blank_page(200, 200)
    writer.encrypt("secret", algorithm="AES-128")
    out = io.BytesIO()
    writer.write(out)
    return out.getvalue()


def test_a_docx_that_unzips_past_the_bound_or_ratio_is_refused_and_a_plain_zip_is_not() -> None:
    assert "UPLOAD_MAX_EXPANDED_BYTES" in (docx_refusal(zip_bomb(20_000_000), BOUNDS) or "")
    assert "UPLOAD_MAX_RATIO" in (docx_refusal(zip_bomb(5_000_000), BOUNDS) or "")
    plain = io.BytesIO()
    with zipfile.ZipFile(plain, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("word/document.xml", "<w:document>" + "words of a memo " * 200 + "</w:document>")
    assert docx_refusal(plain.getvalue(), BOUNDS) is None
    assert "not a readable zip" in (docx_refusal(b"PK\x03\x04 and nothing", BOUNDS) or "")


def test_a_pdf_bomb_stream_and_ten_thousand_pages_are_refused_and_a_small_pdf_is_not() -> None:
    assert "decompression bomb" in (pdf_refusal(stream_bomb(50_000_000), BOUNDS) or "")
    assert "10,000 pages" in (pdf_refusal(many_pages(10_000), BOUNDS) or "")
    assert pdf_refusal(many_pages(3), BOUNDS) is None
    assert pdf_refusal(stream_bomb(100_000), BOUNDS) is None


@pytest_asyncio.fixture(loop_scope="session")
async def db(pg_dsn: str, data_dir: Path) -> AsyncIterator[tuple[Settings, object]]:
    async with migrated_schema(
        pg_dsn, data_dir, upload_max_expanded_bytes=10_000_000, corpus_max_passages=4, ingest_threads=1
    ) as db:
        yield db


async def run(settings: Settings, pool: object, files: list[tuple[str, bytes]]) -> dict[str, dict]:  # type: ignore[type-arg]
    jobs = JobStore(pool)  # type: ignore[arg-type]
    job = await jobs.enqueue_upload("lockers", files, "editor")
    assert await Worker(settings, pool, lambda: load_embedder(settings, for_ingest=True, threads=1)).run_once()
    done = await jobs.get(job.id)
    assert done is not None and done.state == "done", done
    return {d["fileName"]: d for d in done.documents}


async def corpus_rows(pool: object) -> list[tuple[str, str]]:
    async with pool.acquire() as conn:  # type: ignore[attr-defined]
        rows = await conn.fetch("SELECT id, content_hash FROM passages WHERE corpus = 'lockers' ORDER BY id")
    return [(r["id"], r["content_hash"]) for r in rows]


async def test_every_bad_upload_is_refused_with_its_reason_and_the_corpus_keeps_only_the_good(
    db: tuple[Settings, object],
) -> None:
    settings, pool = db
    outcomes = await run(
        settings,
        pool,
        [
            ("lockers.md", GOOD),
            ("bomb.docx", zip_bomb(20_000_000)),
            ("bomb.pdf", stream_bomb(50_000_000)),
            ("long.pdf", many_pages(10_000)),
            ("locked.pdf", encrypted_pdf()),
            ("cut.pdf", b"%PDF-1.4\n1 0 obj << /Type /Catalog >> endobj\n"),
            ("empty.md", b""),
            # A name as the endpoint keeps it (NUL dropped): metadata, never a path.
            (kept_name("\x00../../x\x07.md"), b"\xff\xfe not utf-8"),
        ],
    )
    reasons = {name: o.get("reason", "") for name, o in outcomes.items()}
    assert outcomes["lockers.md"]["status"] == "added"
    assert "UPLOAD_MAX_EXPANDED_BYTES" in reasons["bomb.docx"]
    assert "decompression bomb" in reasons["bomb.pdf"]
    assert "10,000 pages" in reasons["long.pdf"]
    assert "encrypted" in reasons["locked.pdf"]
    assert "corrupt" in reasons["cut.pdf"]
    assert reasons["empty.md"] == "the file is empty"
    assert "not UTF-8" in reasons["../../x\x07.md"]
    assert [o["status"] for n, o in outcomes.items() if n != "lockers.md"] == ["failed"] * 7
    docs = await SourceStore(pool).documents("lockers")  # type: ignore[arg-type]
    assert [d.file_name for d in docs] == ["lockers.md"]
    assert {p.split("#")[0] for p, _ in await corpus_rows(pool)} == {f"{docs[0].id}/lockers.md"}

    # Past CORPUS_MAX_PASSAGES (4 here): the new document fails with the reason, and nothing is switched.
    before = await corpus_rows(pool)
    big = b"# Rules\n" + b"".join(
        b"\n## Rule %d\n\nRule %d says lockers close at %d pm.\n" % (n, n, n) for n in range(6)
    )
    over = await run(settings, pool, [("rules.md", big)])
    assert over["rules.md"]["status"] == "failed" and "CORPUS_MAX_PASSAGES" in over["rules.md"]["reason"]
    assert await corpus_rows(pool) == before
    assert [d.file_name for d in await SourceStore(pool).documents("lockers")] == ["lockers.md"]  # type: ignore[arg-type]


def test_a_pdf_that_takes_too_long_to_read_is_stopped_with_the_reason() -> None:
    from provenance.errors import UnreadableDocument
    from provenance.ingest.documents.pdf import read_pdf

    writer = pypdf.PdfWriter()
    for _ in range(3):
        writer.add_blank_page(200, 200)
    out = io.BytesIO()
    writer.write(out)
    with pytest.raises(UnreadableDocument, match=r"took longer than .* page 1"):
        read_pdf(out.getvalue(), max_seconds=-1.0)
