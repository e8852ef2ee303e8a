"""An upload's sentence vectors come after its switch (issue 45): the corpus answers from the new document
while its job still computes them, in a phase its progress names; a job stopped in that phase leaves the corpus
answerable, and the next run computes exactly the vectors still missing. Against a real Postgres, the real
embedder and, for the wire, the real app with its in-process worker."""

from __future__ import annotations

import asyncio
import threading
import time
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest
import pytest_asyncio

from provenance import text as T
from provenance.access.store import AccessStore
from provenance.guards.apikeys import create_key
from provenance.inference.embedder import Embedder
from provenance.jobs import worker as worker_module
from provenance.jobs.queue import JobStore
from provenance.jobs.worker import Worker
from provenance.services import load_embedder
from provenance.settings import Settings
from provenance.store.corpora import CorpusStore
from provenance.store.pool import create_pool, migrate
from tests.claims.test_sentence_vectors import CountingEmbedder
from tests.conftest import make_settings
from tests.jobs.test_worker import handbook
from tests.reliability.support import drop_schema, migrated_schema, serving_keys


async def with_vectors(pool: Any, corpus: str) -> dict[str, list[tuple[int, int, int, list[float]]]]:
    """passage id -> its stored sentences with vectors (ordinal, start, end, vector), for each passage that has
    them."""
    async with pool.acquire() as conn:
        rows = await conn.fetch(
            "SELECT passage_id, ordinal, start_char, end_char, embedding FROM passage_sentences"
            " WHERE corpus = $1 AND segmenter = $2 AND embedding IS NOT NULL ORDER BY passage_id, ordinal",
            corpus,
            T.SEGMENTER_VERSION,
        )
    out: dict[str, list[tuple[int, int, int, list[float]]]] = {}
    for r in rows:
        out.setdefault(r["passage_id"], []).append(
            (r["ordinal"], r["start_char"], r["end_char"], r["embedding"].to_numpy().tolist())
        )
    return out


async def served_texts(pool: Any, corpus: str) -> dict[str, str]:
    async with pool.acquire() as conn:
        rows = await conn.fetch("SELECT id, text FROM passages WHERE corpus = $1", corpus)
    return {r["id"]: r["text"] for r in rows}


# --- (a) and (c): on the wire, through the real app -----------------------------------------------------------


def test_an_upload_answers_before_its_sentence_vectors_exist_and_its_job_says_so(
    pg_dsn: str, data_dir: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = make_settings(pg_dsn, data_dir, rate_limit_per_hour=0, cache_ttl_s=0, upload_rate_per_hour=0)
    # The sentences phase held until the test has looked: on this machine it would be over in a second.
    release = threading.Event()
    entered = threading.Event()
    fill = worker_module.__dict__.get("fill_missing_sentences")

    async def held(*args: Any, **kwargs: Any) -> int:
        entered.set()
        await asyncio.to_thread(release.wait, 240)
        assert fill is not None
        filled: int = await fill(*args, **kwargs)
        return filled

    # raising=False: without the phase the worker has no such name, and the test fails on what it sees.
    monkeypatch.setattr(worker_module, "fill_missing_sentences", held, raising=False)

    async def keys(pool: asyncpg.Pool) -> dict[str, str | None]:
        return {"admin": await create_key(AccessStore(pool), "root", "admin")}

    async def sentences_stored() -> tuple[int, int]:
        pool = await create_pool(pg_dsn, settings)
        try:
            return len(await served_texts(pool, "travel")), len(await with_vectors(pool, "travel"))
        finally:
            await pool.close()

    with serving_keys(pg_dsn, settings, keys) as (server, h):
        url, admin = server.url, h["admin"]
        assert (
            httpx.post(f"{url}/corpora", json={"name": "travel", "visibility": "public"}, headers=admin).status_code
            == 201
        )
        files = [("files", ("travel.md", handbook(12, "travel"), "text/markdown"))]
        accepted = httpx.post(f"{url}/corpora/travel/documents", files=files, headers=admin, timeout=60)
        assert accepted.status_code == 202, accepted.text
        job_url = f"{url}/jobs/{accepted.json()['jobId']}"
        deadline = time.monotonic() + 240
        job = httpx.get(job_url, headers=admin).json()
        while job["progress"].get("phase") != "sentences":
            assert job["state"] not in ("done", "failed"), f"the job ended with no sentences phase: {job}"
            assert time.monotonic() < deadline, job
            time.sleep(0.1)
            job = httpx.get(job_url, headers=admin).json()
        try:
            assert entered.is_set() and job["state"] == "running"
            assert [d["status"] for d in job["documents"]] == [] and job["progress"]["embedded"] >= 12
            # Switched: the new document's passages are served, and none of their sentences has a vector yet.
            passages, with_sentences = asyncio.run(sentences_stored())
            assert passages >= 12 and with_sentences == 0
            listed = httpx.get(f"{url}/corpora/travel/documents", headers=admin).json()["documents"]
            assert [d["fileName"] for d in listed] == ["travel.md"] and listed[0]["passages"] == passages
            question = {"question": "How much does item 5 cost?", "corpus": "travel"}
            before = httpx.post(f"{url}/ask", json=question, headers=admin, timeout=120).json()
            assert before["status"] == "answered", before
            assert "38" in before["answer"] and any("travel.md#" in c["passageId"] for c in before["citations"])
        finally:
            release.set()
        while job["state"] not in ("done", "failed"):
            assert time.monotonic() < deadline, job
            time.sleep(0.1)
            job = httpx.get(job_url, headers=admin).json()
        assert job["state"] == "done" and [d["status"] for d in job["documents"]] == ["added"]
        progress = job["progress"]
        assert progress["phase"] == "done"
        assert progress["sentencesEmbedded"] == progress["sentencesToEmbed"] == passages
        # Every passage has its sentence vectors once the job ends.
        assert asyncio.run(sentences_stored()) == (passages, passages)
        after = httpx.post(f"{url}/ask", json=question, headers=admin, timeout=120).json()
        assert (after["status"], after["answer"], after["citations"]) == (
            before["status"],
            before["answer"],
            before["citations"],
        )


# --- (b): a job stopped after its switch -----------------------------------------------------------------------


@pytest_asyncio.fixture(loop_scope="session")
async def queue_db(pg_dsn: str, data_dir: Path) -> AsyncIterator[tuple[Settings, Any]]:
    async with migrated_schema(pg_dsn, data_dir, ingest_threads=1) as db:
        yield db


async def until(check: Callable[[], Awaitable[bool]], running: asyncio.Task[Any], what: str) -> None:
    deadline = time.monotonic() + 300
    while not await check():
        assert not running.done(), f"the job ended before {what}"
        assert time.monotonic() < deadline, f"not seen within 300 s: {what}"
        await asyncio.sleep(0.02)


async def test_a_job_stopped_after_its_switch_leaves_the_corpus_answerable_and_the_next_run_fills_only_the_rest(
    queue_db: tuple[Settings, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    settings, pool = queue_db
    store, jobs = CorpusStore(pool), JobStore(pool)
    inner = load_embedder(settings, for_ingest=True, threads=1)
    first = CountingEmbedder(inner)
    # What had been embedded when the corpus switched.
    at_switch: list[list[str]] = []
    switch = CorpusStore.switch_corpus

    async def noted(self: CorpusStore, *args: Any, **kwargs: Any) -> Any:
        out = await switch(self, *args, **kwargs)
        at_switch.append(list(first.texts))
        return out

    monkeypatch.setattr(CorpusStore, "switch_corpus", noted)
    job = await jobs.enqueue_upload("manual", [("manual.md", handbook(150, "travel"))], "editor")
    stopped = asyncio.create_task(Worker(settings, pool, lambda: first, name="stopped").run_once())

    async def part_filled() -> bool:
        filled = len(await with_vectors(pool, "manual"))
        return 0 < filled < len(await served_texts(pool, "manual"))

    await until(part_filled, stopped, "the corpus was served with some of its sentence vectors and not all")
    stopped.cancel()
    with pytest.raises(asyncio.CancelledError):
        await stopped

    # Before the switch only the passages were embedded: each once, and no sentence or word.
    texts = await served_texts(pool, "manual")
    [embedded] = at_switch
    assert len(texts) >= 150 and len(embedded) == len(texts) and all("\n" in t for t in embedded)
    # Stopped in the sentences phase: the corpus answers from the new document as it is.
    state = await store.corpus_state("manual")
    assert state is not None and state.passage_count == len(texts)
    hits = await store.vector_search(inner.embed_query("How much does item 77 cost?"), 4, "manual", exact=True)
    assert any(h.id.endswith("manual.md#travel-rule-77") for h in hits), [h.id for h in hits]
    kept = await with_vectors(pool, "manual")
    missing = sorted(set(texts) - set(kept))
    assert kept and missing
    held = await jobs.get(job.id)
    assert held is not None and held.state == "running" and held.worker == "stopped"

    # The next run of the job (its worker's lease lapsed) computes the missing sentences' vectors, and only those.
    async with pool.acquire() as conn:
        await conn.execute("UPDATE ingest_jobs SET heartbeat_at = now() - interval '5 minutes' WHERE id = $1", job.id)
    second = CountingEmbedder(inner)
    assert await Worker(settings, pool, lambda: second, name="resumer").run_once()
    done = await jobs.get(job.id)
    assert done is not None and done.state == "done" and done.attempts == 2
    # Its document was recorded by the stopped run, which served it: added, not `unchanged`.
    assert [d["status"] for d in done.documents] == ["added"]
    assert done.progress["embedded"] == 0 and done.progress["phase"] == "done"
    assert done.progress["sentencesEmbedded"] == done.progress["sentencesToEmbed"] == len(missing)
    wanted = Counter(texts[pid][a:b] for pid in missing for a, b in T.sentence_spans(texts[pid]))
    sentences = Counter(t for t in second.texts if t in wanted)
    assert sentences == wanted
    # The rest it embedded are the words of those passages no stored vector had: never a sentence or passage.
    assert all(" " not in t and "\n" not in t for t in second.texts if t not in wanted)
    after = await with_vectors(pool, "manual")
    assert set(after) == set(texts)
    # What the stopped run stored is as it was.
    assert {pid: after[pid] for pid in kept} == kept
    assert await store.count_missing_sentences(T.SEGMENTER_VERSION, inner.model_name, "manual") == 0


# --- answering reads no stored sentence vector it lacks -------------------------------------------------------


async def test_a_corpus_answers_the_same_without_its_sentence_vectors(
    pg_dsn: str, data_dir: Path, embedder: Embedder, tmp_path: Path
) -> None:
    """What the switch serves before the sentences phase: passages with no `passage_sentences` row at all. The
    pipeline then splits their sentences by the rule ingest stores them by, and embeds them itself; every
    outcome is the one the stored vectors give."""
    from provenance.ingest.folder import ingest
    from provenance.services import build_services
    from provenance.store import Store
    from tests.claims.test_sentence_vectors import LOCKERS, small_corpus

    settings = make_settings(pg_dsn, data_dir, cache_ttl_s=0)
    pool = await create_pool(pg_dsn, settings)
    await migrate(pool)
    folder = small_corpus(tmp_path / "c", "02-hours-and-access.md", "05-storage-and-lockers.md", "01-membership.md")
    await ingest(Store(pool), folder, lambda: embedder, embedder.model_name)
    questions = [LOCKERS, "When does the front desk open on weekends?", "Can I bring my dog to the workshop?"]

    async def answers() -> tuple[list[tuple[Any, ...]], int]:
        services = await build_services(settings, with_guards=False)
        try:
            out = []
            for n, q in enumerate(questions):
                r = (await services.pipeline.ask(q, request_id=f"q{n}", use_cache=False)).response
                claims = [
                    (c.text, round(c.support, 4), round(c.relevance, 4), c.supporting_passage_ids)
                    for c in r.stages.gate.claims
                ]
                out.append((r.status, r.reason, r.answer, [c.passage_id for c in r.citations], claims))
            sentences = services.profile.sentence_vectors
            cache = getattr(getattr(sentences, "__self__", None), "embedded", 0)
            return out, int(cache)
        finally:
            await services.close()

    try:
        stored, embedded_with = await answers()
        async with pool.acquire() as conn:
            await conn.execute("DELETE FROM passage_sentences WHERE corpus = 'default'")
        computed, embedded_without = await answers()
        assert stored[0][0] == "answered"
        assert computed == stored
        # Without them the verifier embedded the passages' sentences itself.
        assert embedded_without > embedded_with
    finally:
        await pool.close()
        await drop_schema(pg_dsn, settings.database.schema)
