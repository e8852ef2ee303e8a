"""The ingest worker: takes a job from the queue, decides each uploaded file, and runs the corpus's documents
through the folder ingest (its staging area, its content-hash reuse, its one atomic switch), so an upload is
ingested exactly as a folder is.

Each file's outcome is its own: a refused file is named with its reason and the rest go in; a job that ran to
its end is `done` however many of its files failed; `failed` is for a job that could not run.

A job switches its corpus with the new passages' vectors alone, and computes their sentences' vectors after,
as a phase of its own (`JobProgress.phase`): a 50 KB upload embeds about ten sentences for each passage, and
answering needs none of them stored (the verifier embeds what the store lacks), so the corpus answers from the
new documents that much sooner.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import io
import re
import socket
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

from provenance import text as T
from provenance.errors import ConfigurationError
from provenance.inference.embedder import Embedder
from provenance.ingest.bombs import Bounds, docx_refusal, pdf_refusal
from provenance.ingest.describe import EXAMPLE_FILES
from provenance.ingest.folder import IngestReport, corpus_version, fill_missing_sentences, fingerprint, ingest
from provenance.ingest.reuse import Reuse
from provenance.jobs.queue import LEASE_S, Job, JobProgress, JobStore
from provenance.jobs.sites import citations, sync_corpus
from provenance.logs import get_logger
from provenance.settings import Settings
from provenance.store.corpora import CorpusDescription, CorpusStore
from provenance.store.sources import Document, SourceStore

log = get_logger("provenance.jobs.worker")

POLL_S = 1.0
# How often a running job's progress is written (when it moved): what GET /jobs/{id}/events sees.
PROGRESS_EVERY_S = 1.0
TEXT_FORMATS = {".md": "markdown", ".markdown": "markdown", ".txt": "text", ".html": "html", ".htm": "html"}
# Binary formats by their magic bytes: a name can say anything.
BINARY_FORMATS = {".pdf": ("pdf", b"%PDF-"), ".docx": ("docx", b"PK\x03\x04")}
_UNSAFE = re.compile(r"[^A-Za-z0-9._ -]+")
NAME_CHARS = 100


FILE_NAME_CHARS = 300


def kept_name(file_name: str) -> str:
    """A file name as it is kept and shown: no NUL (Postgres text can't hold it), at most FILE_NAME_CHARS
    characters, shortened in the middle so that its extension, which chooses the reader, survives."""
    name = file_name.replace("\x00", "") or "document"
    if len(name) <= FILE_NAME_CHARS:
        return name
    suffix = name[name.rfind(".") :] if "." in name[-12:] else ""
    return name[: FILE_NAME_CHARS - len(suffix) - 1] + "…" + suffix


def safe_name(file_name: str) -> str:
    """A file name as metadata made into one path component: no directories, no control characters, at most
    NAME_CHARS characters, its (lowercased) extension kept so the reader is chosen by it."""
    base = re.split(r"[\\/]", file_name)[-1]
    stem, dot, suffix = base.rpartition(".")
    if not dot:
        stem, suffix = base, ""
    suffix = _UNSAFE.sub("", suffix).lower()[:10]
    stem = _UNSAFE.sub("_", stem).strip(" ._")[: NAME_CHARS - len(suffix) - 1] or "document"
    return f"{stem}.{suffix}" if suffix else stem


def refusal(file_name: str, data: bytes, max_bytes: int, bounds: Bounds | None = None) -> tuple[str, str | None]:
    """(format, reason): the file's format, and why it is refused, or None."""
    suffix = Path(safe_name(file_name)).suffix
    if not data:
        return "", "the file is empty"
    if len(data) > max_bytes:
        return "", f"the file is {len(data):,} bytes; the limit is {max_bytes:,} (UPLOAD_MAX_FILE_BYTES)"
    if suffix in BINARY_FORMATS:
        fmt, magic = BINARY_FORMATS[suffix]
        if not data.startswith(magic):
            return fmt, f"the file is named {suffix} but is not a {fmt.upper()} file (its first bytes say otherwise)"
        if bounds is not None:
            return fmt, (pdf_refusal if fmt == "pdf" else docx_refusal)(data, bounds)
        return fmt, None
    if suffix in TEXT_FORMATS:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            return TEXT_FORMATS[suffix], f"the file is not UTF-8 text (byte {exc.start} is not)"
        return TEXT_FORMATS[suffix], None
    known = ", ".join(sorted([*TEXT_FORMATS, *BINARY_FORMATS]))
    return "", f"files named {suffix or '(no extension)'} are not read; these are: {known}"


class OverLimit(Exception):
    """The documents would make the corpus larger than CORPUS_MAX_PASSAGES."""


class JobRun:
    """One job as a worker runs it: its stores, and its progress (documents read, passages made, passages
    embedded), which the worker's heartbeat writes to the job while it runs."""

    def __init__(
        self,
        job: Job,
        documents: SourceStore,
        store: CorpusStore,
        embedder_factory: Callable[[], Embedder],
        settings: Settings,
        reuse: Reuse | None = None,
    ) -> None:
        self.job, self.corpus, self.reuse = job, job.corpus, reuse
        self.documents, self.store, self.embedder_factory, self.settings = documents, store, embedder_factory, settings
        self.progress = JobProgress()
        limits = settings.ingest
        self.bounds = Bounds(limits.upload_max_expanded_bytes, limits.upload_max_ratio, limits.upload_max_pdf_pages)
        self.cited: dict[str, tuple[str, dict[str, str]]] = {}  # a sync's pages not stored yet (jobs.sites)

    def _progressed(self, report: IngestReport, files: int) -> None:
        self.progress = JobProgress(documents=files, passages=report.passages, embedded=report.embedded)
        limit = self.settings.ingest.corpus_max_passages
        if report.passages > limit:
            # Stops the ingest before its switch: the corpus is served as it was.
            raise OverLimit(f"the corpus would hold more than {limit:,} passages (CORPUS_MAX_PASSAGES)")

    async def rebuild(self, docs: list[tuple[Document, bytes]]) -> dict[str, str]:
        """Make the corpus's passages those of `docs`, each document at its path (its passages are
        `{path}#{slug}`), through the folder ingest's staging area and one switch; returns {document id: why
        it was not read}. No documents at all switch the corpus to none. The new passages' sentences are
        not embedded here: `complete_sentences` does it once the job's documents are recorded."""
        if not docs:
            await self._empty()
            return {}
        # A corpus that also holds a folder's documents stays recorded as that folder's, described by it.
        sources = await self.documents.sources(self.corpus)
        folder = next((Path(s.location) for s in sources if s.kind == "folder"), None)
        with tempfile.TemporaryDirectory(prefix="provenance-job-") as tmp:
            root = Path(tmp)
            paths: dict[str, str] = {}
            for example in [folder / e for e in EXAMPLE_FILES] if folder is not None else []:
                if example.is_file():
                    (root / example.name).symlink_to(example)
            for doc, data in docs:
                path = root / doc.path
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
                paths[doc.path] = doc.id
            try:
                report = await ingest(
                    self.store,
                    root,
                    self.embedder_factory,
                    self.settings.embedding.model,
                    self.settings.ingest.chunk_max_tokens,
                    self.settings.retrieval.hnsw_min_passages,
                    corpus=self.corpus,
                    # The folder is made afresh for each job: the corpus is its documents, wherever they sit now.
                    replace=True,
                    on_progress=self._progressed,
                    recorded_dir=folder,
                    cite=await citations(self),
                    defer_sentences=True,
                    reuse=self.reuse,
                )
            except ConfigurationError as exc:
                # Nothing readable at all: the corpus is left as it was, and every document says why.
                return dict.fromkeys(paths.values(), str(exc).splitlines()[-1])
        return {paths[name]: reason for name, reason in report.skipped_files if name in paths}

    async def _empty(self) -> None:
        model = self.settings.embedding.model
        state = await self.store.corpus_state(self.corpus)
        about = CorpusDescription(
            self.corpus, None, state.title if state else "", state.description if state else "", []
        )
        fp = fingerprint([], model, self.settings.ingest.chunk_max_tokens)
        await self.store.switch_corpus([], model, T.SEGMENTER_VERSION, corpus_version({}, model), fp, [], about)

    async def add(self, files: list[tuple[str, bytes]]) -> list[dict[str, Any]]:
        """An upload's files: each refused with its reason, unchanged (the same bytes are in the corpus
        already), or added; the corpus rebuilt once with the added ones."""
        outcomes: list[dict[str, Any]] = []
        new: list[tuple[Document, bytes]] = []
        source = await self.documents.add_source(self.corpus, "upload")
        for position, (file_name, data) in enumerate(files):
            fmt, reason = refusal(file_name, data, self.settings.ingest.upload_max_file_bytes, self.bounds)
            if reason is not None:
                outcomes.append({"fileName": file_name, "status": "failed", "reason": reason})
                continue
            sha = hashlib.sha256(data).hexdigest()
            # Under an id of its own (random as the job's id is), so that two uploads of one file name never
            # share a passage id; the same on a resumed run of the job, whose staged passages it then finds.
            doc_id = hashlib.sha256(f"{self.job.id}:{position}".encode()).hexdigest()[:12]
            same = await self.documents.with_sha(self.corpus, sha) or next((d for d, _ in new if d.sha256 == sha), None)
            if same is not None:
                # This job's own document, recorded by a run of it stopped after its switch (in the sentences
                # phase): added, and served already.
                status = "added" if same.id == doc_id else "unchanged"
                outcomes.append({"fileName": file_name, "status": status, "id": same.id})
                continue
            path = f"{doc_id}/{safe_name(file_name)}"
            doc = Document(self.corpus, doc_id, source.id, path, file_name, fmt, len(data), sha)
            new.append((doc, data))
            outcomes.append({"fileName": file_name, "status": "added", "id": doc.id})
        if new:
            kept = await self.documents.originals(self.corpus)
            try:
                skipped = await self.rebuild([*kept, *new])
            except OverLimit as exc:
                skipped = {doc.id: str(exc) for doc, _ in new}
            for outcome in outcomes:
                reason = skipped.get(outcome.get("id", ""))
                if reason is not None and outcome["status"] == "added":
                    outcome.update(status="failed", reason=reason)
            for doc, data in new:
                if doc.id not in skipped:
                    await self.documents.add(doc, data)
        return outcomes

    async def remove(self, ids: list[str]) -> list[dict[str, Any]]:
        """Documents removed by id: the corpus rebuilt once without them, then they are forgotten (a job
        killed between the two is resumed and removes them again)."""
        kept = await self.documents.originals(self.corpus)
        gone = [d for d, _ in kept if d.id in ids]
        outcomes: list[dict[str, Any]] = [{"fileName": d.file_name, "status": "removed", "id": d.id} for d in gone]
        found = {d.id for d in gone}
        outcomes += [
            {"fileName": "", "status": "failed", "id": i, "reason": "no such document in this corpus"}
            for i in ids
            if i not in found
        ]
        if gone:
            await self.rebuild([(d, data) for d, data in kept if d.id not in found])
            await self.documents.remove(self.corpus, sorted(found))
        self.progress = msgspec.structs.replace(self.progress, documents=len(gone))
        return outcomes

    async def remove_source(self, source_id: str) -> list[dict[str, Any]]:
        """A source removed (`provenance sources remove`): the corpus rebuilt once without its documents, then the
        source forgotten with them (and a site's pages), so that its passages are served no more once the job
        is done. A job killed between the two is resumed and does both again."""
        source = await self.documents.source(source_id)
        if source is None or source.corpus != self.corpus:
            return [{"fileName": "", "status": "failed", "id": source_id, "reason": "no such source in this corpus"}]
        kept = await self.documents.originals(self.corpus)
        if any(d.source_id == source_id for d, _ in kept):
            await self.rebuild([(d, data) for d, data in kept if d.source_id != source_id])
        removed = await self.documents.remove_source(source_id)
        self.progress = msgspec.structs.replace(self.progress, documents=removed)
        return [{"fileName": source.location, "status": "removed", "id": source_id, "documents": removed}]

    async def complete_sentences(self) -> None:
        """The job's phase after its switch: the sentences' vectors of the corpus's passages that have none
        (this job's new ones, and any an earlier job left when it was stopped in this phase), a window at a
        time, each written in one transaction. Stopped here, the corpus answers as it is, and the next job of
        the corpus, or `fill_missing_sentences` at the next start, computes only what is still missing."""
        self.progress = msgspec.structs.replace(self.progress, phase="sentences")

        def progressed(done: int, total: int) -> None:
            self.progress = msgspec.structs.replace(self.progress, sentences_embedded=done, sentences_to_embed=total)

        await fill_missing_sentences(
            self.store,
            self.embedder_factory,
            self.settings.embedding.model,
            # No progress bar: a worker's progress is the job's (a bar would draw on a serving terminal).
            stream=io.StringIO(),
            corpus=self.corpus,
            on_progress=progressed,
        )
        self.progress = msgspec.structs.replace(self.progress, phase="done")


class WarmEmbedder:
    """A job's embedder, kept for the next job that starts within KEEP_S of the last one's end: uploads come
    in bursts, and each job loading the model afresh cost it 0.6-1.1 s (bench/upload_jobs.py --phases). Idle
    longer, it is dropped, so an idle worker holds no model, as before."""

    KEEP_S = 60.0

    def __init__(self, factory: Callable[[], Embedder]) -> None:
        self.factory = factory
        self._kept: Embedder | None = None
        self._used = 0.0

    def __call__(self) -> Embedder:
        if self._kept is None or time.monotonic() - self._used > self.KEEP_S:
            self._kept = None  # the old one goes before the new one loads
            self._kept = self.factory()
        self._used = time.monotonic()
        return self._kept

    def touch(self) -> None:
        """A job ended: the embedder's KEEP_S counts from now."""
        self._used = time.monotonic()

    def drop_idle(self) -> None:
        if self._kept is not None and time.monotonic() - self._used > self.KEEP_S:
            self._kept = None


class Worker:
    """One worker: takes jobs one at a time until stopped. `on_done`: told after each job (the server's
    pipeline then looks at its corpora's versions at the next question, not up to CORPUS_CHECK_EVERY_S
    later)."""

    def __init__(
        self,
        settings: Settings,
        pool: Any,
        embedder_factory: Callable[[], Embedder],
        name: str = "",
        on_done: Callable[[], None] | None = None,
    ) -> None:
        self.settings = settings
        self.jobs = JobStore(pool)
        self.documents = SourceStore(pool)
        self.store = CorpusStore(pool)
        self.warm = WarmEmbedder(embedder_factory)
        self.embedder_factory: Callable[[], Embedder] = self.warm
        # Its jobs' parsed documents and passages, for the next job's rebuild; dropped when idle, as the
        # embedder is.
        self.reuse = Reuse()
        self._ran = time.monotonic()
        self.name = name or f"{socket.gethostname()}-{uuid.uuid4().hex[:6]}"
        self.on_done = on_done
        self._wake = asyncio.Event()

    def wake(self) -> None:
        """A job was queued in this process: take it now rather than at the next poll."""
        self._wake.set()

    async def run_once(self, only: str | None = None) -> bool:
        """One job taken and run, if there is one (`only`: that job, which `provenance sources sync` queued and
        runs in the foreground, through the same code a serving worker would)."""
        job = await self.jobs.claim(self.name, only=only)
        if job is None:
            return False
        log.info("ingest job taken", job=job.id, corpus=job.corpus, kind=job.kind, attempt=job.attempts)
        if "folder" in job.payload:
            # A `provenance ingest` that stopped before its end: its folder is on its own machine, not here.
            await self.jobs.abandon(job.id, self.name)
            return True
        run = JobRun(job, self.documents, self.store, self.embedder_factory, self.settings, self.reuse)
        beating = asyncio.create_task(self._heartbeat(run, asyncio.current_task()))
        try:
            if job.kind == "add":
                outcomes = await run.add(await self.jobs.uploads(job.id))
            elif job.kind == "remove" and "source" in job.payload:
                outcomes = await run.remove_source(str(job.payload["source"]))
            elif job.kind == "remove":
                outcomes = await run.remove(list(job.payload.get("documents", [])))
            elif job.kind == "sync":
                reports, outcomes = await sync_corpus(run, self.settings)
                outcomes = [
                    *({"fileName": r.source, "status": "synced", "summary": r.line()} for r in reports),
                    *outcomes,
                ]
            else:
                raise ValueError(f"this worker runs no {job.kind!r} jobs")
            # Switched, and its documents recorded: the server's pipeline looks at the new version now, not
            # at the job's end, which is the sentences' vectors away.
            if self.on_done is not None:
                self.on_done()
            try:
                await run.complete_sentences()
            except Exception:
                # The job's documents are in and answer questions: what is missing is computed by the next job
                # of the corpus, or the next start. Its progress shows how far this phase got.
                log.exception("sentence vectors not all computed; the next job completes them", job=job.id)
            beating.cancel()
            await self.jobs.finish(job.id, self.name, "done", outcomes, progress=run.progress.wire())
        except asyncio.CancelledError:
            if beating.done() and not beating.cancelled() and beating.result() is False:
                log.warning("ingest job taken over by another worker; this one stops", job=job.id)
                return True
            raise
        except Exception as exc:
            log.exception("ingest job failed", job=job.id)
            await self.jobs.finish(job.id, self.name, "failed", [], error=str(exc) or type(exc).__name__)
        finally:
            beating.cancel()
            self.warm.touch()
            self._ran = time.monotonic()
            if self.on_done is not None:
                self.on_done()
        return True

    async def _heartbeat(self, run: JobRun, running: asyncio.Task[Any] | None) -> bool:
        """Touch the job while it runs, so no other worker takes it over, and write its progress when it
        moved; when it was taken over anyway (this worker was stalled past the lease), stop the work here: the
        other worker owns it now."""
        written: JobProgress | None = None
        touched = time.monotonic()
        while True:
            await asyncio.sleep(PROGRESS_EVERY_S)
            if run.progress == written and time.monotonic() - touched < LEASE_S / 4:
                continue
            written, touched = run.progress, time.monotonic()
            if not await self.jobs.heartbeat(run.job.id, self.name, written.wire()):
                if running is not None:
                    running.cancel()
                return False

    async def run(self) -> None:
        while True:
            try:
                if not await self.run_once():
                    # Idle: queue the syncs that are due (`sources add --every`), then wait for work.
                    for corpus in await self.jobs.schedule_syncs():
                        log.info("site sync scheduled", corpus=corpus)
                    self.warm.drop_idle()
                    if self.reuse and time.monotonic() - self._ran > WarmEmbedder.KEEP_S:
                        self.reuse = Reuse()
                    await self._idle()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("ingest worker: the queue could not be read; trying again")
                await asyncio.sleep(POLL_S * 5)

    async def _idle(self) -> None:
        """Until the next poll (other replicas' jobs), or sooner when this process queued one (`wake`)."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), POLL_S)
        self._wake.clear()
