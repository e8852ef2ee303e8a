"""Sentence vectors computed once, at ingest, and read from Postgres ever after (issue 34): the migration of a
database that lacks them, a start-up that embeds nothing, a question that embeds only itself, an interrupted
ingest that is never served and resumes without embedding again, and corpora a user can remove."""

from __future__ import annotations

import shutil
import subprocess
import sys
from collections.abc import Sequence
from pathlib import Path

import asyncpg
import numpy as np
import pytest

from provenance import text as T
from provenance.inference.embedder import Embedder
from provenance.ingest.folder import fill_missing_sentences, ingest
from provenance.settings import REPO_ROOT, Settings
from provenance.store import Store
from provenance.store.pool import create_pool, migrate, migration_files
from tests.conftest import make_settings
from tests.ingest.test_corpora import write_garden
from tests.test_cli import clean_env

LOCKERS = "How much does a standard locker cost per month?"


class Stopped(Exception):
    """An ingest stopped part way (Ctrl-C, a crash, the machine going down)."""


class CountingEmbedder:
    """The real embedder, counting its calls: texts embedded as documents, and queries."""

    def __init__(self, inner: Embedder, fail_after: int | None = None) -> None:
        self.inner = inner
        self.model_name = inner.model_name
        self.dim = inner.dim
        self.documents = 0
        self.document_calls = 0
        self.queries = 0
        self.texts: list[str] = []  # everything embedded, in order
        # Raise on the call after this many document calls: an ingest stopped part way (Ctrl-C, a crash).
        self.fail_after = fail_after

    def embed_documents(self, texts: Sequence[str]) -> np.ndarray:
        if self.fail_after is not None and self.document_calls >= self.fail_after:
            raise Stopped
        self.document_calls += 1
        self.documents += len(texts)
        self.texts.extend(texts)
        return self.inner.embed_documents(texts)

    def embed_query(self, text: str) -> np.ndarray:
        self.queries += 1
        self.texts.append(text)
        return self.inner.embed_query(text)

    def count_tokens(self, text: str) -> int:
        return self.inner.count_tokens(text)


def small_corpus(root: Path, *names: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for name in names or ("02-hours-and-access.md", "05-storage-and-lockers.md"):
        shutil.copy(REPO_ROOT / "corpus" / name, root / name)
    return root


async def sentence_rows(store: Store, corpus: str) -> list[tuple[str, int, int, np.ndarray]]:
    async with store.pool.acquire() as conn:
        ids = [r["id"] for r in await conn.fetch("SELECT id FROM passages WHERE corpus = $1", corpus)]
    return await store.sentence_vectors(corpus, ids, T.SEGMENTER_VERSION, Settings().embedding.model)


async def test_stored_sentence_vectors_are_the_ones_the_verifier_would_compute(
    fresh_store: Store, embedder: Embedder, tmp_path: Path
) -> None:
    await ingest(fresh_store, small_corpus(tmp_path / "c"), lambda: embedder, embedder.model_name)
    passage = await fresh_store.passage("05-storage-and-lockers.md#lockers")
    assert passage is not None
    stored = [r for r in await sentence_rows(fresh_store, "default") if r[0] == passage.id]
    ranges = T.sentence_ranges(passage.text)
    # One row per sentence unit, its span the segmenter's, its text the passage's own characters.
    assert sorted((a, b) for _, a, b, _ in stored) == [(a, b) for a, b, _ in ranges] and len(ranges) > 2
    mine = embedder.embed_documents([s for _, _, s in ranges])
    by_span = {(a, b): v for _, a, b, v in stored}
    for (a, b, _), vector in zip(ranges, mine, strict=True):
        np.testing.assert_allclose(by_span[(a, b)], vector, atol=1e-5)


async def test_a_database_without_sentence_vectors_is_migrated_once(
    pg_dsn: str, data_dir: Path, embedder: Embedder, tmp_path: Path
) -> None:
    """A database migrated and ingested before 006: its passages gain their sentence vectors once, by
    `fill_missing_sentences` (what `serve` and `db migrate` run), and never again."""
    settings = make_settings(pg_dsn, data_dir)
    old = tmp_path / "old-migrations"
    old.mkdir()
    for path in migration_files():
        if path.name < "006":
            shutil.copy(path, old / path.name)
    pool = await create_pool(pg_dsn, settings)
    try:
        await migrate(pool, old)
        texts = {"a.md#one": "The shed opens at nine. It closes at five.", "a.md#two": "Plots cost $40 a year."}
        vectors = embedder.embed_documents(list(texts.values()))
        async with pool.acquire() as conn:
            for i, ((pid, text), vector) in enumerate(zip(texts.items(), vectors, strict=True)):
                await conn.execute(
                    "INSERT INTO passages (id, source, heading, position, text, token_count, embedding,"
                    " embedding_model, content_hash) VALUES ($1, 'a.md', 'A', $2, $3, 9, $4, $5, 'h')",
                    pid,
                    i,
                    text,
                    vector,
                    embedder.model_name,
                )
            await conn.execute(
                "INSERT INTO answer_cache (cache_key, question, response, expires_at)"
                " VALUES ('k', 'q', '{\"corpus\": \"default\"}', now() + interval '1 hour')"
            )
        assert await migrate(pool) == [p.name for p in migration_files() if p.name >= "006"]
        store = Store(pool)
        async with pool.acquire() as conn:
            assert await conn.fetchval("SELECT corpus FROM answer_cache WHERE cache_key = 'k'") == "default"

        counting = CountingEmbedder(embedder)
        assert await fill_missing_sentences(store, lambda: counting, embedder.model_name) == 2
        rows = await sentence_rows(store, "default")
        assert sorted((pid, texts[pid][a:b]) for pid, a, b, _ in rows) == [
            ("a.md#one", "It closes at five."),
            ("a.md#one", "The shed opens at nine."),
            ("a.md#two", "Plots cost $40 a year."),
        ]
        sentences_embedded = counting.documents
        assert sentences_embedded >= 3  # the sentences, and the words the verifier matches softly

        # Never again: the second run finds nothing missing and never loads the embedder.
        def no_embedder() -> Embedder:
            raise AssertionError("the embedder was loaded again")

        assert await fill_missing_sentences(store, no_embedder, embedder.model_name) == 0
    finally:
        await pool.close()
        conn = await asyncpg.connect(pg_dsn)
        await conn.execute(f'DROP SCHEMA IF EXISTS "{settings.database.schema}" CASCADE')
        await conn.close()


async def test_start_up_embeds_nothing_and_a_question_embeds_only_itself(
    pg_dsn: str, data_dir: Path, embedder: Embedder, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    from provenance import services as services_module
    from provenance.profiles.local import _INJECTION_EXEMPLARS, _OFF_TOPIC_EXEMPLARS
    from provenance.services import build_services

    settings = make_settings(pg_dsn, data_dir, cache_ttl_s=0)
    pool = await create_pool(pg_dsn, settings)
    await migrate(pool)
    await ingest(Store(pool), small_corpus(tmp_path / "c"), lambda: embedder, embedder.model_name)
    await pool.close()

    counting = CountingEmbedder(getattr(embedder, "inner", embedder))
    # The service's own embedder stack (the micro-batcher and the per-request memo) over the counted model.
    monkeypatch.setattr(services_module, "get_embedder", lambda *args: counting)
    pool = await create_pool(pg_dsn, settings)
    rows = await Store(pool).passage_texts(100, T.SEGMENTER_VERSION)
    await pool.close()
    # What start-up reads for the verifier's vocabulary: each passage with the spans ingest stored for it.
    assert rows and all(spans == T.sentence_spans(text) for text, spans in rows)
    stored = {text for text, _ in rows}
    split: list[str] = []
    segment = T._spans
    monkeypatch.setattr(T, "_spans", lambda text: split.append(text) or segment(text))
    services = await build_services(settings, with_guards=False)
    try:
        # Start-up embeds nothing of the corpus: only the local screener's own fixed examples (17 sentences,
        # whatever the corpus).
        assert counting.texts == [*_INJECTION_EXEMPLARS, *_OFF_TOPIC_EXEMPLARS]
        # Nor does it split a passage into sentences again: the verifier learns the corpus by the stored spans.
        assert stored and not stored & set(split)
        for i in range(2):  # the first question after start-up, and a second one with nothing cached
            before = len(counting.texts)
            outcome = await services.pipeline.ask(LOCKERS, request_id=f"t{i}", use_cache=False)
            assert outcome.response.status == "answered" and "$14" in (outcome.response.answer or "")
            # One text embedded on the request path: the question. Every passage sentence the verifier
            # read, and every word it matched, came from the store.
            assert counting.texts[before:] == [LOCKERS]
    finally:
        await services.close()
        conn = await asyncpg.connect(pg_dsn)
        await conn.execute(f'DROP SCHEMA IF EXISTS "{settings.database.schema}" CASCADE')
        await conn.close()


async def test_an_interrupted_ingest_is_never_served_and_resumes_without_embedding_again(
    fresh_store: Store, embedder: Embedder, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import provenance.ingest.folder

    monkeypatch.setattr(provenance.ingest.folder, "EMBED_WINDOW", 8)  # several windows for these few passages
    folder = small_corpus(tmp_path / "c", "02-hours-and-access.md", "05-storage-and-lockers.md", "01-membership.md")
    first = await ingest(fresh_store, folder, lambda: embedder, embedder.model_name)
    served = await fresh_store.stored_hashes()

    # Every file changes (a new sentence in each section), and the ingest stops part way.
    for path in folder.glob("*.md"):
        path.write_text(path.read_text().replace("\n## ", "\nEdited today.\n\n## "))
    stopping = CountingEmbedder(embedder, fail_after=3)
    with pytest.raises(Stopped):
        await ingest(fresh_store, folder, lambda: stopping, embedder.model_name)
    # Nothing of it is served: the same passages, the same version (which keys the answer cache).
    state = await fresh_store.corpus_state()
    assert state is not None and state.version == first.version
    assert await fresh_store.stored_hashes() == served
    staged = await fresh_store.staged_passages("default")
    assert staged and any(s.embedded for s in staged.values())

    counting = CountingEmbedder(embedder)
    resumed = await ingest(fresh_store, folder, lambda: counting, embedder.model_name)
    assert resumed.resumed == sum(1 for s in staged.values() if s.embedded) > 0
    assert resumed.version != first.version
    # What was staged was not embedded again: passages embedded by the two runs add up to the changed ones.
    changed = sum(1 for pid, (h, _) in (await fresh_store.stored_hashes()).items() if served.get(pid, ("",))[0] != h)
    assert resumed.embedded + resumed.resumed == changed > resumed.embedded
    assert await fresh_store.staged_passages("default") == {}  # the switch empties the staging area
    # And every served passage has its sentence vectors.
    assert await fresh_store.count_missing_sentences(T.SEGMENTER_VERSION, embedder.model_name) == 0


async def test_removing_a_corpus_leaves_the_others_untouched(
    fresh_store: Store, embedder: Embedder, tmp_path: Path
) -> None:
    await ingest(fresh_store, small_corpus(tmp_path / "c"), lambda: embedder, embedder.model_name)
    await ingest(fresh_store, write_garden(tmp_path / "garden"), lambda: embedder, embedder.model_name, corpus="garden")
    for corpus in ("default", "garden"):
        await fresh_store.cache_put(f"key-{corpus}", "q", f'{{"corpus": "{corpus}"}}', 3600, corpus)
    default_before = (await fresh_store.stored_hashes(), await sentence_rows(fresh_store, "default"))
    garden_sentences = len(await sentence_rows(fresh_store, "garden"))

    removed = await fresh_store.remove_corpus("garden")
    assert removed is not None
    assert (removed.passages, removed.sentences, removed.cached_answers) == (4, garden_sentences, 1)
    assert [c.name for c in await fresh_store.corpora()] == ["default"]
    assert await fresh_store.stored_hashes("garden") == {}
    assert await sentence_rows(fresh_store, "garden") == []
    assert await fresh_store.cache_get("key-garden") is None
    # The other corpus: the same passages, sentence vectors and cached answer.
    after = (await fresh_store.stored_hashes(), await sentence_rows(fresh_store, "default"))
    assert after[0] == default_before[0]
    assert [(p, a, b) for p, a, b, _ in after[1]] == [(p, a, b) for p, a, b, _ in default_before[1]]
    assert await fresh_store.cache_get("key-default") is not None
    assert await fresh_store.remove_corpus("garden") is None


def test_corpora_cli_lists_and_removes_only_when_asked(pg_dsn: str, tmp_path: Path) -> None:
    import asyncio
    import uuid

    schema = f"t_cli_{uuid.uuid4().hex[:8]}"
    env = clean_env(DATABASE_URL=pg_dsn, DB_SCHEMA=schema, DATA_DIR=str(tmp_path / "data"))

    def provenance(*args: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "provenance", *args], env=env, input=stdin, capture_output=True, text=True
        )

    try:
        garden = write_garden(tmp_path / "garden")
        assert provenance("ingest", str(small_corpus(tmp_path / "c", "05-storage-and-lockers.md"))).returncode == 0
        assert provenance("ingest", str(garden), "--corpus", "garden").returncode == 0
        listed = provenance("corpora")
        assert listed.returncode == 0, listed.stderr
        header, *rows = listed.stdout.splitlines()
        assert header.split() == ["NAME", "PASSAGES", "MODEL", "VERSION", "INGESTED", "FOLDER"]
        assert [r.split()[0] for r in rows] == ["default", "garden"]
        assert rows[1].split()[1] == "4" and rows[1].endswith(str(garden.resolve()))

        declined = provenance("corpora", "remove", "garden", stdin="n\n")
        assert declined.returncode == 1 and "nothing removed" in declined.stderr
        assert "remove corpus garden (4 passages from" in declined.stdout  # the question asked
        default = provenance("corpora", "remove", "default", "--yes")
        assert default.returncode == 2 and "--force" in default.stderr
        unknown = provenance("corpora", "remove", "nursery", "--yes")
        assert unknown.returncode == 2 and "no corpus named 'nursery'" in unknown.stderr

        confirmed = provenance("corpora", "remove", "garden", stdin="y\n")
        assert confirmed.returncode == 0, confirmed.stderr
        assert "removed corpus garden: 4 passages" in confirmed.stdout
        assert [r.split()[0] for r in provenance("corpora").stdout.splitlines()[1:]] == ["default"]
    finally:

        async def drop() -> None:
            conn = await asyncpg.connect(pg_dsn)
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            await conn.close()

        asyncio.run(drop())
