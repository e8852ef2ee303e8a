"""A folder as a source of a corpus's documents, against a real Postgres and the real embedder: its re-ingest
adds, updates and removes its own documents and leaves uploaded ones alone, its passages keep `{file}#{slug}`,
its bytes are kept in Postgres, another folder is a conflict unless replaced, and an upload into a folder's
corpus keeps the folder recorded."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from provenance.errors import CorpusConflict
from provenance.jobs.commands import ingest_folder
from provenance.jobs.queue import JobStore
from provenance.jobs.worker import Worker
from provenance.services import load_embedder
from provenance.settings import Settings
from provenance.store.corpora import CorpusStore
from provenance.store.sources import SourceStore
from tests.reliability.support import migrated_schema

ROOMS = "# Rooms\n\n## Booking\n\nMeeting rooms are booked through the front desk, up to two weeks ahead.\n"
PARKING = "# Parking\n\n## Permits\n\nParking permits cost 30 dollars a month and renew in January.\n"
BIKES = "# Bikes\n\n## Storage\n\nBikes are stored in the basement cage, which opens with a badge.\n"
UPLOAD = b"# Visitors\n\n## Badges\n\nVisitors collect a paper badge at reception and return it on leaving.\n"


@pytest_asyncio.fixture(loop_scope="session")
async def db(pg_dsn: str, data_dir: Path) -> AsyncIterator[tuple[Settings, object]]:
    async with migrated_schema(pg_dsn, data_dir) as db:
        yield db


async def passage_ids(pool: object, corpus: str) -> set[str]:
    async with pool.acquire() as conn:  # type: ignore[attr-defined]
        return {r["id"] for r in await conn.fetch("SELECT id FROM passages WHERE corpus = $1", corpus)}


async def upload(settings: Settings, pool: object, corpus: str) -> str:
    jobs = JobStore(pool)  # type: ignore[arg-type]
    job = await jobs.enqueue_upload(corpus, [("visitors.md", UPLOAD)], "editor")
    worker = Worker(settings, pool, lambda: load_embedder(settings, for_ingest=True, threads=1), name="w")
    assert await worker.run_once()
    done = await jobs.get(job.id)
    assert done is not None and [d["status"] for d in done.documents] == ["added"], done
    return str(done.documents[0]["id"])


async def test_a_folder_reingest_changes_its_own_documents_and_leaves_uploads_alone(
    db: tuple[Settings, object], tmp_path: Path
) -> None:
    settings, pool = db
    folder = tmp_path / "office"
    (folder / "guides").mkdir(parents=True)
    (folder / "rooms.md").write_text(ROOMS)
    (folder / "guides" / "parking.md").write_text(PARKING)
    await ingest_folder(settings, pool, folder, corpus="office")
    assert {p.split("#")[0] for p in await passage_ids(pool, "office")} == {"rooms.md", "guides/parking.md"}
    sources = SourceStore(pool)  # type: ignore[arg-type]
    kept = {d.path: data for d, data in await sources.originals("office")}
    assert kept == {"rooms.md": ROOMS.encode(), "guides/parking.md": PARKING.encode()}

    # An upload into the folder's corpus goes in beside it; the corpus stays the folder's.
    upload_id = await upload(settings, pool, "office")
    ids = await passage_ids(pool, "office")
    assert any(p.startswith(f"{upload_id}/visitors.md#") for p in ids) and "rooms.md#booking" in ids
    state = await CorpusStore(pool).corpus_state("office")  # type: ignore[arg-type]
    assert state is not None and state.source_dir == str(folder.resolve())
    [uploaded] = [d for d in await sources.documents("office") if d.id == upload_id]

    # The folder changes: one file edited, one removed, one added.
    (folder / "rooms.md").write_text(ROOMS.replace("two weeks", "three weeks"))
    (folder / "guides" / "parking.md").unlink()
    (folder / "bikes.md").write_text(BIKES)
    summary = await ingest_folder(settings, pool, folder, corpus="office")
    assert "guides/parking.md" in summary
    ids = await passage_ids(pool, "office")
    assert {p.split("#")[0] for p in ids} == {"rooms.md", "bikes.md", f"{upload_id}/visitors.md"}
    docs = {d.path: d for d in await sources.documents("office")}
    assert set(docs) == {"rooms.md", "bikes.md", f"{upload_id}/visitors.md"}
    assert docs[f"{upload_id}/visitors.md"] == uploaded  # untouched, its time included
    async with pool.acquire() as conn:  # type: ignore[attr-defined]
        text = await conn.fetchval("SELECT text FROM passages WHERE corpus = 'office' AND id = 'rooms.md#booking'")
    assert "three weeks" in text

    # Another folder is a conflict; replacing it removes the first folder's documents, never the upload.
    other = tmp_path / "annex"
    other.mkdir()
    (other / "bikes.md").write_text(BIKES)
    with pytest.raises(CorpusConflict):
        await ingest_folder(settings, pool, other, corpus="office")
    await ingest_folder(settings, pool, other, corpus="office", replace=True)
    assert {d.path for d in await sources.documents("office")} == {"bikes.md", f"{upload_id}/visitors.md"}
    assert [s.location for s in await sources.sources("office") if s.kind == "folder"] == [str(other.resolve())]
    jobs = JobStore(pool)  # type: ignore[arg-type]
    async with pool.acquire() as conn:  # type: ignore[attr-defined]
        syncs = await conn.fetch("SELECT state FROM ingest_jobs WHERE corpus = 'office' AND kind = 'sync'")
    # Each ingest held the corpus's job slot: done, or failed for the conflict.
    assert sorted(r["state"] for r in syncs) == ["done", "done", "done", "failed"]
    assert await jobs.claim("anyone") is None


async def test_an_unchanged_folder_is_not_embedded_again(db: tuple[Settings, object], tmp_path: Path) -> None:
    settings, pool = db
    (tmp_path / "rooms.md").write_text(ROOMS)
    await ingest_folder(settings, pool, tmp_path, corpus="calm")
    assert "unchanged" in await ingest_folder(settings, pool, tmp_path, corpus="calm")
