"""Where an upload's seconds go, from the request to the first answer from it: the real app served on loopback
in this process (its in-process ingest worker, INGEST_THREADS=1, PROFILE=local), its pipeline stages timed by
wrapping the functions that do them (nothing in the service is changed for it).

Phases, in order: the request (POST, until its 202); the queue's pickup (the job queued to taken); in the job
up to its switch, the embedder's load, reading (survey, outline, chunking), embedding (the passages, and their
sentences where the job embeds them before its switch), the words' vectors (looked up, embedded, written),
staging writes, the switch, and the rest (the job's own reads and writes); then from the switch to its
corpus's new version seen by the pipeline (the cache key's version, and the verifier's vocabulary re-learnt:
`refresh`), and the first answer from the new document. Asking starts once the job's progress says it has
switched (`phase: sentences`), or once it is done where the job has no such phase; the job's end, after any
sentences phase, is timed too. Used by bench/upload_jobs.py.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import uvicorn

from provenance.access.store import AccessStore
from provenance.guards.apikeys import create_key
from provenance.inference.llm_server import free_port
from provenance.ingest import folder
from provenance.jobs import worker as worker_module
from provenance.jobs.queue import JobStore
from provenance.pipeline.corpora import CorpusRegistry
from provenance.settings import Settings
from provenance.store.corpora import CorpusStore
from provenance.store.pool import create_pool

QUESTION = "How much does the Maker membership cost each month?"


class Phases:
    """Seconds spent in each wrapped function, and when the pipeline last re-read the corpora."""

    def __init__(self) -> None:
        self.seconds: dict[str, float] = defaultdict(float)
        self.refreshed_at: list[float] = []
        # When each switch committed, and the phases' seconds then (what the job spent up to its switch).
        self.switched_at: list[float] = []
        self.at_switch: dict[str, float] = {}
        self._inside: set[str] = set()
        self._lock = threading.Lock()

    def add(self, phase: str, seconds: float) -> None:
        with self._lock:
            self.seconds[phase] += seconds

    def timed(self, phase: str, fn: Callable[..., Any], *, generator: bool = False) -> Callable[..., Any]:
        phases = self

        if asyncio.iscoroutinefunction(fn):

            async def async_wrapper(*args: Any, **kwargs: Any) -> Any:
                started = time.perf_counter()
                phases._inside.add(phase)
                try:
                    return await fn(*args, **kwargs)
                finally:
                    phases._inside.discard(phase)
                    phases.add(phase, time.perf_counter() - started)

            return async_wrapper

        def wrapper(*args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            # Embedding the words' vectors happens inside `_store_words`: counted there, not as passages'.
            name = "words" if phase == "embed" and "words" in phases._inside else phase
            try:
                return list(fn(*args, **kwargs)) if generator else fn(*args, **kwargs)
            finally:
                if name == phase:
                    phases.add(phase, time.perf_counter() - started)

        return wrapper


@contextmanager
def wrapped(phases: Phases) -> Iterator[None]:
    """The ingest's and the registry's stage functions timed for the duration."""
    targets: list[tuple[Any, str, str, bool]] = [
        (folder, "_embedder", "embedder load", False),
        (folder, "_survey", "read", False),
        (folder, "describe", "read", False),
        (folder, "chunk_blocks", "read", True),
        (folder, "_embed_sorted", "embed", False),
        (folder, "_store_words", "words", False),
        (CorpusStore, "stage", "stage writes", False),
        (CorpusStore, "switch_corpus", "switch", False),
        (CorpusRegistry, "refresh", "refresh", False),
    ]
    originals = [(owner, name, getattr(owner, name)) for owner, name, _, _ in targets]
    for owner, name, phase, generator in targets:
        setattr(owner, name, phases.timed(phase, getattr(owner, name), generator=generator))
    refresh = CorpusRegistry.refresh

    async def noted(self: CorpusRegistry) -> None:
        await refresh(self)
        phases.refreshed_at.append(time.time())

    CorpusRegistry.refresh = noted  # type: ignore[method-assign]
    timed_switch = CorpusStore.switch_corpus

    async def switched(self: CorpusStore, *args: Any, **kwargs: Any) -> Any:
        out = await timed_switch(self, *args, **kwargs)
        phases.switched_at.append(time.time())
        phases.at_switch = dict(phases.seconds)
        return out

    CorpusStore.switch_corpus = switched  # type: ignore[method-assign]
    # The CPU seconds of the whole ingest (this process's, all threads): what the load of the shared machine
    # changes least, beside the wall-clock phases.
    ingest = worker_module.ingest  # type: ignore[attr-defined]

    async def cpu_counted(*args: Any, **kwargs: Any) -> Any:
        started = time.process_time()
        try:
            return await ingest(*args, **kwargs)
        finally:
            phases.add("cpu", time.process_time() - started)

    worker_module.ingest = cpu_counted  # type: ignore[attr-defined]
    try:
        yield
    finally:
        for owner, name, original in originals:
            setattr(owner, name, original)
        worker_module.ingest = ingest  # type: ignore[attr-defined]


class InProcessServer:
    """The app on loopback in a thread of this process, as `provenance serve` runs it (its lifespan starts
    the ingest workers)."""

    def __init__(self, settings: Settings) -> None:
        from provenance.app import create_app

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(create_app(settings), host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=lambda: asyncio.run(self.server.serve()), daemon=True)

    def __enter__(self) -> InProcessServer:
        self.thread.start()
        deadline = time.monotonic() + 300
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the server did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=30)


async def admin_key(settings: Settings, dsn: str) -> str:
    pool = await create_pool(dsn, settings)
    try:
        return str(await create_key(AccessStore(pool), f"bench-{time.monotonic_ns()}", "admin"))
    finally:
        await pool.close()


async def job_times(settings: Settings, dsn: str, job_id: str) -> dict[str, float]:
    pool = await create_pool(dsn, settings)
    try:
        job = await JobStore(pool).get(job_id)
    finally:
        await pool.close()
    assert job is not None and job.started_at and job.finished_at, job
    return {
        "created": job.created_at.timestamp(),
        "started": job.started_at.timestamp(),
        "finished": job.finished_at.timestamp(),
        "passages": float(job.progress.get("passages", 0)),
    }


def upload_to_answer(url: str, key: str, corpus: str, name: str, data: bytes, phases: Phases) -> dict[str, Any]:
    """One upload into `corpus` (created empty, and asked once, first), timed phase by phase to its first
    answer. Returns the phases' seconds and the job's id."""
    headers = {"Authorization": f"Bearer {key}"}
    with httpx.Client(base_url=url, headers=headers, timeout=120) as client:
        assert client.post("/corpora", json={"name": corpus, "visibility": "public"}).status_code == 201
        before = client.post("/ask", json={"question": QUESTION, "corpus": corpus}).json()
        assert before.get("status") != "answered", before
        phases.seconds.clear()
        phases.at_switch = {}
        sent = time.time()
        accepted = client.post("/corpora/" + corpus + "/documents", files=[("files", (name, data, "text/markdown"))])
        accepted_at = time.time()
        assert accepted.status_code == 202, accepted.text
        job_id = accepted.json()["jobId"]
        # Until the corpus is switched: the job's sentences phase, where it has one, or its end.
        while True:
            job = client.get(f"/jobs/{job_id}").json()
            if job["state"] in ("done", "failed") or job["progress"].get("phase") == "sentences":
                break
            time.sleep(0.05)
        switch_seen = time.time()
        asks = 0
        while True:
            asks += 1
            asked = time.time()
            body = client.post("/ask", json={"question": QUESTION, "corpus": corpus}).json()
            if body.get("status") == "answered":
                break
            assert time.time() - sent < 600, body
            time.sleep(0.25)
        answered = time.time()
        while client.get(f"/jobs/{job_id}").json()["state"] not in ("done", "failed"):
            time.sleep(0.05)
        in_job = dict(phases.at_switch or phases.seconds)
    return {"job": job_id, "sent": sent, "accepted": accepted_at, "switch_seen": switch_seen, "asked": asked,
            "answered": answered, "asks": asks, "in_job": in_job, "refreshed_at": list(phases.refreshed_at),
            "switched_at": phases.switched_at[-1], "all": dict(phases.seconds),
            "refresh_s": phases.seconds.get("refresh", 0.0) - in_job.get("refresh", 0.0)}  # fmt: skip


def breakdown(run: dict[str, Any], times: dict[str, float]) -> dict[str, float]:
    """The phases' seconds, in order, and the total from the request to the answer, then the job's end. The
    request and the job overlap by the job's insert (milliseconds); the rest up to the answer follow one
    another. What the job spends after its switch (its sentences phase, where it has one) overlaps the asks."""
    in_job, after = run["in_job"], run["all"]
    to_switch = run["switched_at"] - times["started"]
    named = ("embedder load", "read", "embed", "words", "stage writes", "switch")
    return {
        "request (POST to its 202)": run["accepted"] - run["sent"],
        "queue pickup (queued to taken)": times["started"] - times["created"],
        **{f"job to its switch: {n}": in_job.get(n, 0.0) for n in named},
        "job to its switch: the rest (its reads, its documents)": to_switch - sum(in_job.get(n, 0.0) for n in named),
        # Until the /ask that answered was sent: the switch seen, and asks refused on the old version.
        "switch to the answering /ask": run["asked"] - run["switched_at"],
        "that /ask (the new version's refresh included)": run["answered"] - run["asked"],
        "**total: request to answered**": run["answered"] - run["sent"],
        "after the switch: embed (sentences)": after.get("embed", 0.0) - in_job.get("embed", 0.0),
        "after the switch: words' vectors": after.get("words", 0.0) - in_job.get("words", 0.0),
        "switch to the job's end": times["finished"] - run["switched_at"],
        "total: request to the job's end": times["finished"] - run["sent"],
        # Counted when the ingest returns, just after its switch (so not in `in_job`, taken at the switch).
        "CPU seconds of the ingest up to its switch (the process's, all threads)": after.get("cpu", 0.0),
    }
