"""Ingest of a folder of real PDF, HTML and Word files beside every kind of file it must skip: the rest
ingest, the summary names each skipped file and why, an unchanged folder embeds nothing, a PDF's passages
keep their pages through the database to GET /passages/{id} and the citations of /ask, and the command
exits non-zero only when nothing could be ingested. Files are made as tests/ingest/documents_support.py says."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import asyncpg
import httpx
import pytest
import pytest_asyncio

from provenance.inference.embedder import Embedder
from provenance.ingest.folder import ingest
from provenance.settings import REPO_ROOT
from provenance.store import Store
from provenance.store.pool import create_pool, migrate
from tests.conftest import LiveServer, make_settings
from tests.ingest.documents_support import (
    CHROMIUM,
    encrypted_pdf,
    html_to_pdf,
    markdown_to_docx,
    markdown_to_html,
    scanned_pdf,
)
from tests.ingest.test_ingest import CountingEmbedder
from tests.test_cli import clean_env, provenance

CORPUS = REPO_ROOT / "corpus"
BAD = {
    "locked.pdf": "encrypted PDF: it needs a password",
    "scan.pdf": "no text layer",
    "cut.pdf": "truncated",
    "cut.docx": "corrupt or truncated Word file",
    "zero.html": "empty",
    "notes.rtf": "not a format ingest reads (.rtf",
}


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def mixed_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Three chapters, one in each format, and one file of each kind ingest must skip."""
    if not CHROMIUM.exists():
        pytest.skip(f"{CHROMIUM} is not installed (`make chromium` installs Debian's package)")
    folder = tmp_path_factory.mktemp("mixed")
    storage = (CORPUS / "05-storage-and-lockers.md").read_text()
    pdf = await html_to_pdf(markdown_to_html(storage), folder / "storage.pdf")
    (folder / "hours.html").write_text(
        markdown_to_html((CORPUS / "02-hours-and-access.md").read_text(), boilerplate=True)
    )
    markdown_to_docx((CORPUS / "01-membership.md").read_text(), folder / "membership.docx")
    encrypted_pdf(pdf, folder / "locked.pdf")
    await scanned_pdf(folder / "scan.pdf")
    (folder / "cut.pdf").write_bytes(pdf.read_bytes()[: pdf.stat().st_size // 2])
    (folder / "cut.docx").write_bytes((folder / "membership.docx").read_bytes()[:2000])
    (folder / "zero.html").write_bytes(b"")
    (folder / "notes.rtf").write_text("{\\rtf1 notes}")
    return folder


async def test_the_rest_ingest_the_bad_are_named_and_nothing_is_embedded_twice(
    fresh_store: Store, embedder: Embedder, mixed_folder: Path
) -> None:
    counting = CountingEmbedder(embedder)
    report = await ingest(fresh_store, mixed_folder, lambda: counting, embedder.model_name)
    assert dict(report.skipped_files).keys() == BAD.keys()
    for name, why in report.skipped_files:
        assert BAD[name] in why and "\n" not in why
    assert report.files == 3 and report.embedded == report.passages
    embedded = report.passages + report.sentences_embedded + report.words_embedded
    assert counting.embedded == embedded
    summary = report.summary().splitlines()
    assert summary[-len(BAD) - 1] == f"skipped {len(BAD)} files:"
    assert [line.split(":")[0].strip() for line in summary[-len(BAD) :]] == sorted(BAD)

    ids = await fresh_store.stored_hashes()
    assert {pid.split("#")[0] for pid in ids} == {"storage.pdf", "hours.html", "membership.docx"}
    assert "storage.pdf#lockers" in ids

    lockers = await fresh_store.passage("storage.pdf#lockers")
    assert lockers is not None and lockers.pages == [1] and lockers.heading == "Storage and Lockers > Lockers"
    html_passage = await fresh_store.passage(next(pid for pid in ids if pid.startswith("hours.html#")))
    assert html_passage is not None and html_passage.pages is None

    again = await ingest(fresh_store, mixed_folder, lambda: counting, embedder.model_name)
    assert again.unchanged and counting.embedded == embedded  # nothing embedded again
    assert again.summary().splitlines()[1:] == summary[-len(BAD) - 1 :]  # still says what it skipped


@pytest_asyncio.fixture(loop_scope="session")
async def pdf_server(pg_dsn: str, data_dir: Path, embedder: Embedder, mixed_folder: Path) -> AsyncIterator[str]:
    """The real app over a corpus ingested from the mixed folder, in a schema of its own."""
    settings = make_settings(
        pg_dsn, data_dir, schema=f"t_docs_{uuid.uuid4().hex[:8]}", rate_limit_per_hour=0, cache_ttl_s=0
    )
    pool = await create_pool(pg_dsn, settings)
    await migrate(pool)
    await ingest(Store(pool), mixed_folder, lambda: embedder, embedder.model_name)
    await pool.close()
    with LiveServer(settings) as server:
        yield server.url
    conn = await asyncpg.connect(pg_dsn)
    await conn.execute(f'DROP SCHEMA IF EXISTS "{settings.database.schema}" CASCADE')
    await conn.close()


async def test_pages_reach_the_wire(pdf_server: str) -> None:
    async with httpx.AsyncClient(base_url=pdf_server, timeout=60) as client:
        passage = (await client.get("/passages/storage.pdf%23lockers")).json()
        assert passage["pages"] == [1] and passage["source"] == "storage.pdf"
        html_passage = (await client.get("/passages/hours.html%23opening-hours")).json()
        assert html_passage.get("pages") is None

        asked = await client.post("/ask", json={"question": "How much does a standard locker cost per month?"})
        body = asked.json()
        retrieved = body["stages"]["retrieval"]["passages"]
        assert any(p["source"] == "storage.pdf" and p["pages"] for p in retrieved)
        assert body["status"] == "answered", body.get("message")
        cited = [c for c in body["citations"] if c["source"] == "storage.pdf"]
        assert cited and all(c["pages"] and c["pages"][0] >= 1 for c in cited)

        schema = (await client.get("/schema/openapi.json")).json()
        assert "pages" in schema["components"]["schemas"]["Citation"]["properties"]


def test_the_command_exits_non_zero_only_when_nothing_could_be_ingested(
    pg_dsn: str, mixed_folder: Path, tmp_path: Path
) -> None:
    schema = f"t_cli_docs_{uuid.uuid4().hex[:8]}"
    env = clean_env(DATABASE_URL=pg_dsn, DB_SCHEMA=schema, DATA_DIR=str(tmp_path), LOG_LEVEL="warning")
    only_bad = tmp_path / "only-bad"
    only_bad.mkdir()
    for name in BAD:
        (only_bad / name).write_bytes((mixed_folder / name).read_bytes())
    try:
        assert provenance("db", "migrate", env=env).returncode == 0
        failed = provenance("ingest", str(only_bad), "--corpus", "bad", env=env)
        assert failed.returncode == 2 and failed.stdout == ""
        assert failed.stderr.startswith(f"error: nothing to ingest in {only_bad}")
        for name, why in BAD.items():
            assert f"  {name}: " in failed.stderr and why in failed.stderr

        mixed = provenance("ingest", str(mixed_folder), "--corpus", "mixed", env=env)
        assert mixed.returncode == 0, mixed.stderr
        lines = mixed.stdout.splitlines()
        assert lines[0].startswith("ingested 3 files into corpus mixed")
        assert f"skipped {len(BAD)} files:" in lines
        assert all(any(line.startswith(f"  {name}: ") for line in lines) for name in BAD)
    finally:

        async def drop() -> None:
            conn = await asyncpg.connect(pg_dsn)
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            await conn.close()

        asyncio.run(drop())
