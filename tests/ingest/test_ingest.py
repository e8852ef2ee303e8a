import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from provenance.inference.embedder import Embedder
from provenance.ingest import folder as ingest_module
from provenance.ingest.folder import ingest
from provenance.settings import REPO_ROOT
from provenance.store import Store


class CountingEmbedder:
    """The real embedder, counting how many texts it was asked to embed."""

    def __init__(self, inner: Embedder) -> None:
        self.inner = inner
        self.model_name = inner.model_name
        self.dim = inner.dim
        self.embedded = 0

    def embed_documents(self, texts):  # type: ignore[no-untyped-def]
        self.embedded += len(texts)
        return self.inner.embed_documents(texts)

    def embed_query(self, text):  # type: ignore[no-untyped-def]
        return self.inner.embed_query(text)

    def count_tokens(self, text):  # type: ignore[no-untyped-def]
        return self.inner.count_tokens(text)


async def test_ingest_embeds_once_and_then_only_what_changed(
    fresh_store: Store, embedder: Embedder, tmp_path: Path
) -> None:
    corpus = tmp_path / "corpus"
    shutil.copytree(REPO_ROOT / "corpus", corpus)
    counting = CountingEmbedder(embedder)

    first = await ingest(fresh_store, corpus, lambda: counting, embedder.model_name)
    # Each passage once, each of its sentences once and each word once (the verifier's vectors, stored).
    assert first.embedded == first.passages > 20
    assert first.sentences_embedded > first.passages
    embedded = first.passages + first.sentences_embedded + first.words_embedded
    assert counting.embedded == embedded
    version_1 = first.version

    second = await ingest(fresh_store, corpus, lambda: counting, embedder.model_name)
    assert second.unchanged and counting.embedded == embedded  # nothing embedded again

    target = corpus / "05-storage-and-lockers.md"
    target.write_text(target.read_text().replace("$14 per month", "$15 per month"))
    edited_file_passages = sum(1 for pid in await fresh_store.stored_hashes() if pid.startswith("05-"))
    before = counting.embedded
    third = await ingest(fresh_store, corpus, lambda: counting, embedder.model_name)
    assert third.embedded == 1  # only the edited section's passage, and its sentences
    assert 1 <= third.sentences_embedded < 20
    assert third.version != version_1
    assert counting.embedded == before + 1 + third.sentences_embedded + third.words_embedded
    assert edited_file_passages >= 2

    (corpus / "08-contacts-and-governance.md").unlink()
    fourth = await ingest(fresh_store, corpus, lambda: counting, embedder.model_name)
    assert fourth.deleted > 0 and fourth.embedded == 0
    assert not any(pid.startswith("08-") for pid in await fresh_store.stored_hashes())


async def test_bad_files_are_reported_and_skipped(fresh_store: Store, embedder: Embedder, tmp_path: Path) -> None:
    (tmp_path / "good.md").write_text("# Doc\n\n## Hours\n\nWe open at nine.\n")
    (tmp_path / "binary.md").write_bytes(b"\x89PNG\x00\x00\x01")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9 menu".encode("latin-1"))
    (tmp_path / "empty.md").write_text("  \n")
    (tmp_path / "image.png").write_bytes(b"\x89PNG")
    report = await ingest(fresh_store, tmp_path, lambda: embedder, embedder.model_name)
    skipped = dict(report.skipped_files)
    assert set(skipped) == {"binary.md", "latin1.txt", "empty.md", "image.png"}
    assert "UTF-8" in skipped["latin1.txt"] and "binary" in skipped["binary.md"]
    assert report.passages == 1
    assert list(await fresh_store.stored_hashes()) == ["good.md#hours"]


async def test_coverage_notes_are_not_ingested(fresh_store: Store, embedder: Embedder) -> None:
    report = await ingest(fresh_store, REPO_ROOT / "corpus", lambda: embedder, embedder.model_name)
    assert not any(pid.startswith("COVERAGE") for pid in await fresh_store.stored_hashes())
    state = await fresh_store.corpus_state()
    assert state is not None and state.passage_count == report.passages
    assert len(state.files) == 8


async def test_a_running_pipeline_notices_a_new_ingest(fresh_store: Store, embedder: Embedder, tmp_path: Path) -> None:
    from provenance.pipeline.door import Pipeline
    from provenance.profiles.local import build_local_profile
    from provenance.settings import Settings

    corpus = tmp_path / "corpus"
    shutil.copytree(REPO_ROOT / "corpus", corpus)
    first = await ingest(fresh_store, corpus, lambda: embedder, embedder.model_name)
    pipeline = Pipeline(Settings(), fresh_store, embedder, build_local_profile(embedder))
    await pipeline.corpora.refresh()
    assert pipeline.corpora.version == first.version

    target = corpus / "05-storage-and-lockers.md"
    target.write_text(target.read_text().replace("$14 per month", "$16 per month"))
    second = await ingest(fresh_store, corpus, lambda: embedder, embedder.model_name)
    assert second.version != first.version
    pipeline.corpora.check_every_s = 0.0
    outcome = await pipeline.ask("How much does a standard locker cost per month?", request_id="t", use_cache=False)
    assert pipeline.corpora.version == second.version == outcome.response.corpus_version
    assert outcome.response.answer is not None and "$16" in outcome.response.answer


async def test_a_job_of_this_process_makes_the_next_question_look_at_once(
    fresh_store: Store, embedder: Embedder, tmp_path: Path
) -> None:
    # An in-process ingest worker tells the pipeline when its job ends (Worker's on_done): the next question
    # sees the new version without waiting out the check interval, however long that is.
    from provenance.pipeline.door import Pipeline
    from provenance.profiles.local import build_local_profile
    from provenance.settings import Settings

    corpus = tmp_path / "corpus"
    shutil.copytree(REPO_ROOT / "corpus", corpus)
    await ingest(fresh_store, corpus, lambda: embedder, embedder.model_name)
    pipeline = Pipeline(Settings(), fresh_store, embedder, build_local_profile(embedder))
    await pipeline.corpora.refresh()
    pipeline.corpora.check_every_s = 3600.0
    target = corpus / "05-storage-and-lockers.md"
    target.write_text(target.read_text().replace("$14 per month", "$16 per month"))
    second = await ingest(fresh_store, corpus, lambda: embedder, embedder.model_name)
    question = "How much does a standard locker cost per month?"
    stale = await pipeline.ask(question, request_id="t1", use_cache=False)
    assert stale.response.corpus_version != second.version
    pipeline.corpora.look_soon()
    fresh = await pipeline.ask(question, request_id="t2", use_cache=False)
    assert fresh.response.corpus_version == second.version
    assert fresh.response.answer is not None and "$16" in fresh.response.answer


async def _stored_vectors(store: Store, corpus: str) -> tuple[list[Any], list[Any]]:
    async with store.pool.acquire() as conn:
        passages = await conn.fetch(
            "SELECT id, heading, text, content_hash, embedding FROM passages WHERE corpus = $1 ORDER BY id", corpus
        )
        sentences = await conn.fetch(
            "SELECT passage_id, ordinal, start_char, end_char, embedding FROM passage_sentences"
            " WHERE corpus = $1 ORDER BY passage_id, ordinal",
            corpus,
        )
    return passages, sentences


async def test_what_ingest_stores_does_not_depend_on_its_batches(
    fresh_store: Store, embedder: Embedder, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A batch pads its texts to the longest and the allocator settles how its memory is held: neither may
    # change a vector. The same folder, once in ingest's own batches and once a text at a time in windows
    # of other passages, stores the same passages, sentences and vectors.
    await ingest(fresh_store, REPO_ROOT / "corpus", lambda: embedder, embedder.model_name, corpus="batched")
    monkeypatch.setattr(ingest_module, "EMBED_WINDOW", 7)
    await ingest(fresh_store, REPO_ROOT / "corpus", lambda: embedder, embedder.model_name, corpus="alone", batch_size=1)
    batched, alone = await _stored_vectors(fresh_store, "batched"), await _stored_vectors(fresh_store, "alone")
    for rows_a, rows_b in zip(batched, alone, strict=True):
        assert len(rows_a) == len(rows_b) > 40
        for a, b in zip(rows_a, rows_b, strict=True):
            assert [v for k, v in a.items() if k != "embedding"] == [v for k, v in b.items() if k != "embedding"]
            assert np.allclose(a["embedding"].to_numpy(), b["embedding"].to_numpy(), atol=1e-5)


def test_a_batch_is_bounded_by_its_tokens_not_its_characters() -> None:
    # 40 texts of 256 tokens each (a table or links: few characters a token): at most BATCH_CELLS / 256**2
    # of them per batch, whatever their characters; short texts fill a batch up to its count.
    long, short = [256] * 40, [10] * 40
    batches = list(ingest_module._batches(list(range(40)), long, 32))
    assert max(len(b) for b in batches) == ingest_module.BATCH_CELLS // 256**2 == 8
    assert sorted(i for b in batches for i in b) == list(range(40))
    assert [len(b) for b in ingest_module._batches(list(range(40)), short, 32)] == [32, 8]
    assert [len(b) for b in ingest_module._batches([0, 1], [4096, 4096], 32)] == [1, 1]


async def test_a_rebuild_embeds_a_few_new_passages_among_many_in_full_windows(
    fresh_store: Store, embedder: Embedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # An upload's job rebuilds the corpus from all its documents, the new ones sorted in among the old: the
    # passages stored already must not count towards a window, or the new ones are embedded a few at a time.
    folder = tmp_path / "docs"
    shutil.copytree(REPO_ROOT / "corpus", folder)
    await ingest(fresh_store, folder, lambda: embedder, embedder.model_name, corpus="grows")
    # New documents between the old ones by name, each a few passages.
    for n, old in enumerate(sorted(folder.glob("0*.md"))):
        text = old.read_text().replace("Maker", f"Builder{n}")
        (folder / f"{old.stem}-b.md").write_text(text)
    monkeypatch.setattr(ingest_module, "EMBED_WINDOW", 7)
    flushed: list[tuple[int, int]] = []  # (rows with something to embed, rows) of each window
    flush = ingest_module._flush

    async def counted(store: Any, corpus: str, model: str, emb: Embedder, window: Any, *rest: Any) -> None:
        flushed.append((sum(1 for _, passage, spans in window.rows if passage or spans), len(window.rows)))
        await flush(store, corpus, model, emb, window, *rest)

    monkeypatch.setattr(ingest_module, "_flush", counted)
    report = await ingest(fresh_store, folder, lambda: embedder, embedder.model_name, corpus="grows")
    assert report.embedded > 7 * 3
    to_embed = [n for n, _ in flushed]
    assert sum(to_embed) == report.embedded
    # Every window but the last is full of work; unchanged passages ride along without counting.
    assert all(n == 7 for n in to_embed[:-1]), flushed
    assert any(rows > n for n, rows in flushed), flushed
