"""Sources and their documents against a real Postgres: a source is made once per (corpus, kind, location),
each source lists only its own documents, a changed file replaces its document at the same path, removing a
source removes its documents and no other's, and the uploads kept before 015 belong to their corpus's upload
source afterwards."""

from __future__ import annotations

import shutil
from pathlib import Path

import asyncpg
import pytest

from provenance.store import Store
from provenance.store.pool import MIGRATIONS_DIR, create_pool, migrate, migration_files
from provenance.store.sources import Document, SourceStore, source_id
from tests.conftest import make_settings


def doc(corpus: str, source: str, path: str, sha: str = "a" * 64, doc_id: str | None = None) -> Document:
    return Document(
        corpus, doc_id or path.replace("/", "-")[:12], source, path, path.rsplit("/")[-1], "markdown", 3, sha
    )


async def test_a_source_is_made_once_and_lists_only_its_own_documents(fresh_store: Store) -> None:
    sources = SourceStore(fresh_store.pool)
    folder = await sources.add_source("handbook", "folder", "/srv/handbook")
    again = await sources.add_source("handbook", "folder", "/srv/handbook")
    assert again.id == folder.id and again.created_at == folder.created_at and folder.synced_at is None
    site = await sources.add_source("handbook", "site", "https://example.org/", {"maxPages": 50})
    upload = await sources.add_source("handbook", "upload")
    await sources.add_source("other", "upload")
    assert [s.kind for s in await sources.sources("handbook")] == ["folder", "site", "upload"]
    assert (await sources.source(site.id)).options == {"maxPages": 50}  # type: ignore[union-attr]
    # Options given again replace the old ones; none given keeps them.
    await sources.add_source("handbook", "site", "https://example.org/")
    assert (await sources.source(site.id)).options == {"maxPages": 50}  # type: ignore[union-attr]
    await sources.add_source("handbook", "site", "https://example.org/", {"maxPages": 9})
    assert (await sources.source(site.id)).options == {"maxPages": 9}  # type: ignore[union-attr]

    await sources.add(doc("handbook", folder.id, "guide/intro.md"), b"one")
    await sources.add(doc("handbook", site.id, "example.org/faq"), b"two")
    await sources.add(doc("handbook", upload.id, "0123456789ab/intro.md"), b"three")
    assert [d.path for d in await sources.documents("handbook", folder.id)] == ["guide/intro.md"]
    assert [d.path for d in await sources.documents("handbook", upload.id)] == ["0123456789ab/intro.md"]
    assert len(await sources.documents("handbook")) == 3
    await sources.synced(folder.id)
    assert (await sources.source(folder.id)).synced_at is not None  # type: ignore[union-attr]


async def test_a_changed_file_replaces_its_document_and_removing_a_source_leaves_the_others(
    fresh_store: Store,
) -> None:
    sources = SourceStore(fresh_store.pool)
    folder = await sources.add_source("handbook", "folder", "/srv/handbook")
    upload = await sources.add_source("handbook", "upload")
    await sources.add(doc("handbook", folder.id, "intro.md", "a" * 64, "f1"), b"old")
    await sources.add(doc("handbook", folder.id, "intro.md", "b" * 64, "f1"), b"new")
    await sources.add(doc("handbook", upload.id, "u1/intro.md", "c" * 64, "u1"), b"upload")
    kept = dict((d.path, data) for d, data in await sources.originals("handbook"))
    assert kept == {"intro.md": b"new", "u1/intro.md": b"upload"}
    assert (await sources.with_sha("handbook", "b" * 64)).id == "f1"  # type: ignore[union-attr]
    assert await sources.with_sha("handbook", "a" * 64) is None
    # Two documents of one corpus never share a path, whatever their sources.
    with pytest.raises(asyncpg.UniqueViolationError):
        await sources.add(doc("handbook", upload.id, "u2/x.md", doc_id="f1"), b"x")
    assert await sources.remove_source(folder.id) == 1
    assert await sources.source(folder.id) is None
    assert [d.id for d in await sources.documents("handbook")] == ["u1"]
    # Removing the corpus takes its documents and sources with it.
    await fresh_store.remove_corpus("handbook")
    assert await sources.sources("handbook") == [] and await sources.documents("handbook") == []


async def test_uploads_kept_before_sources_existed_belong_to_their_corpus_upload_source(
    pg_dsn: str, data_dir: Path, tmp_path: Path
) -> None:
    settings = make_settings(pg_dsn, data_dir)
    before = [p for p in migration_files() if p.name < "015"]
    for p in before:
        shutil.copy(p, tmp_path / p.name)
    pool = await create_pool(pg_dsn, settings)
    try:
        await migrate(pool, tmp_path)
        async with pool.acquire() as conn:
            await conn.execute(
                "INSERT INTO documents (corpus, id, file_name, format, bytes, sha256, original) VALUES"
                " ('handbook', 'abc', '../../notes.md', 'markdown', 1, 's1', 'x'),"
                " ('handbook', 'def', 'policy.md', 'markdown', 1, 's2', 'y')"
            )
        assert await migrate(pool, MIGRATIONS_DIR) == [p.name for p in migration_files() if p.name >= "015"]
        sources = SourceStore(pool)
        [upload] = await sources.sources("handbook")
        assert upload.kind == "upload" and upload.id == source_id("handbook", "upload", "")
        paths = {d.id: d.path for d in await sources.documents("handbook", upload.id)}
        assert paths == {"abc": "abc/notes.md", "def": "def/policy.md"}
    finally:
        await pool.close()
        conn = await asyncpg.connect(pg_dsn)
        await conn.execute(f'DROP SCHEMA IF EXISTS "{settings.database.schema}" CASCADE')
        await conn.close()
