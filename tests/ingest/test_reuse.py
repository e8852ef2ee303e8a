"""A worker's rebuild reads and cuts again only the documents that changed (issue 45): the rest are found by
name and content in what its earlier jobs parsed, and the corpus is the same as a full read makes."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from provenance.inference.embedder import Embedder
from provenance.ingest import folder
from provenance.ingest.folder import ingest
from provenance.ingest.reuse import Reuse, _Bounded
from provenance.settings import REPO_ROOT
from provenance.store import Store


async def test_a_rebuild_reads_and_cuts_only_what_changed_and_makes_the_same_corpus(
    fresh_store: Store, embedder: Embedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = tmp_path / "docs"
    shutil.copytree(REPO_ROOT / "corpus", docs)
    read, cut = [], []
    real_read, real_cut = folder.read_document, folder.chunk_blocks

    def reading(name: str, raw: bytes) -> Any:
        read.append(name)
        return real_read(name, raw)

    def cutting(source: str, *args: Any, **kwargs: Any) -> Any:
        cut.append(source)
        return real_cut(source, *args, **kwargs)

    monkeypatch.setattr(folder, "read_document", reading)
    monkeypatch.setattr(folder, "chunk_blocks", cutting)
    reuse = Reuse()
    model = embedder.model_name

    first = await ingest(fresh_store, docs, lambda: embedder, model, corpus="jobs", reuse=reuse)
    # Every document but the notes about the corpus (COVERAGE.md, README.md), which are skipped unread.
    documents = {n for n, p in folder.candidates(docs) if not p.read_text().startswith(folder.IGNORE_MARKER)}
    assert len(documents) == 8
    assert set(read) == documents and sorted(read) == sorted(set(read))  # each read once
    assert set(cut) == documents
    read.clear()
    cut.clear()

    # The next job: one document edited, one added, the rest as they were.
    edited = docs / "05-storage-and-lockers.md"
    edited.write_text(edited.read_text().replace("$14 per month", "$15 per month"))
    (docs / "09-parking.md").write_text("# Parking\n\n## Bikes\n\nBikes are locked in the yard overnight.\n")
    second = await ingest(fresh_store, docs, lambda: embedder, model, corpus="jobs", reuse=reuse)
    assert set(read) == set(cut) == {"05-storage-and-lockers.md", "09-parking.md"}
    assert second.version != first.version and second.embedded == 2

    # The same passages as a corpus read whole, without anything reused.
    whole = await ingest(fresh_store, docs, lambda: embedder, model, corpus="whole")
    assert whole.version == second.version and whole.passages == second.passages
    assert await fresh_store.stored_hashes("jobs") == await fresh_store.stored_hashes("whole")


def test_the_kept_documents_are_bounded_by_their_size_least_recently_used_first_out() -> None:
    kept: _Bounded[str] = _Bounded(len, 10)
    kept.put("a", "aaaa")
    kept.put("b", "bbbb")
    assert kept.get("a") == "aaaa"  # a is now the most recently used
    kept.put("c", "cccc")  # 12 characters would pass the bound: b goes
    assert kept.get("b") is None and kept.get("a") == "aaaa" and kept.get("c") == "cccc"
    kept.put("d", "d" * 11)  # larger than the whole bound: not kept, and nothing else lost
    assert kept.get("d") is None and len(kept) == 2
