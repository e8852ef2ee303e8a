"""The ingest worker: takes a job from the queue, decides each uploaded file, and runs the corpus's documents
through the folder ingest (its staging area, its content-hash reuse, its one atomic switch), so an upload is
ingested exactly as a folder is.

Each file's outcome is its own: a refused file is named with its reason and the rest go in; a job that ran to
its end is `done` however many of its files failed; `failed` is for a job that could not run.
"""

from __future__ import annotations

import asyncio
import hashlib
import re
import socket
import tempfile
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

from provenance.errors import ConfigurationError
from provenance.inference.embedder import Embedder
from provenance.ingest.folder import ingest
from provenance.jobs.queue import LEASE_S, Job, JobStore
from provenance.logs import get_logger
from provenance.settings import Settings
from provenance.store.corpora import CorpusStore
from provenance.store.sources import Document, SourceStore

log = get_logger("provenance.jobs.worker")

POLL_S = 1.0
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


def refusal(file_name: str, data: bytes, max_bytes: int) -> tuple[str, str | None]:
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
        return fmt, None
    if suffix in TEXT_FORMATS:
        try:
            data.decode("utf-8")
        except UnicodeDecodeError as exc:
            return TEXT_FORMATS[suffix], f"the file is not UTF-8 text (byte {exc.start} is not)"
        return TEXT_FORMATS[suffix], None
    known = ", ".join(sorted([*TEXT_FORMATS, *BINARY_FORMATS]))
    return "", f"files named {suffix or '(no extension)'} are not read; these are: {known}"


async def run_upload(
    job: Job,
    worker: str,
    jobs: JobStore,
    documents: SourceStore,
    store: CorpusStore,
    embedder_factory: Callable[[], Embedder],
    settings: Settings,
) -> None:
    corpus = job.corpus
    outcomes: list[dict[str, Any]] = []
    new: list[tuple[Document, bytes]] = []
    source = await documents.add_source(corpus, "upload")
    for file_name, data in await jobs.uploads(job.id):
        fmt, reason = refusal(file_name, data, settings.ingest.upload_max_file_bytes)
        if reason is not None:
            outcomes.append({"fileName": file_name, "status": "failed", "reason": reason})
            continue
        sha = hashlib.sha256(data).hexdigest()
        same = await documents.with_sha(corpus, sha) or next((d for d, _ in new if d.sha256 == sha), None)
        if same is not None:
            outcomes.append({"fileName": file_name, "status": "unchanged", "id": same.id})
            continue
        doc_id = uuid.uuid4().hex[:12]
        # Under its random id, so that two uploads of one file name never share a passage id.
        doc = Document(corpus, doc_id, source.id, f"{doc_id}/{safe_name(file_name)}", file_name, fmt, len(data), sha)
        new.append((doc, data))
        outcomes.append({"fileName": file_name, "status": "added", "id": doc.id})
    if new:
        kept = await documents.originals(corpus)
        skipped = await _ingest(corpus, [*kept, *new], store, embedder_factory, settings)
        for outcome in outcomes:
            reason = skipped.get(outcome.get("id", ""))
            if reason is not None and outcome["status"] == "added":
                outcome.update(status="failed", reason=reason)
        for doc, data in new:
            if doc.id not in skipped:
                await documents.add(doc, data)
    await jobs.finish(job.id, worker, "done", outcomes)


async def _ingest(
    corpus: str,
    docs: list[tuple[Document, bytes]],
    store: CorpusStore,
    embedder_factory: Callable[[], Embedder],
    settings: Settings,
) -> dict[str, str]:
    """Ingest the corpus's documents, each at its path (so its passages are `{path}#{slug}`); returns
    {document id: why it was not read}."""
    with tempfile.TemporaryDirectory(prefix="provenance-upload-") as tmp:
        root = Path(tmp)
        paths: dict[str, str] = {}
        for doc, data in docs:
            path = root / doc.path
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(data)
            paths[doc.path] = doc.id
        try:
            report = await ingest(
                store,
                root,
                embedder_factory,
                settings.embedding.model,
                settings.ingest.chunk_max_tokens,
                settings.retrieval.hnsw_min_passages,
                corpus=corpus,
                # The folder is made afresh for each job: the corpus is its documents, wherever they sit now.
                replace=True,
            )
        except ConfigurationError as exc:
            # Nothing readable at all: the corpus is left as it was, and every document says why.
            return dict.fromkeys(paths.values(), str(exc).splitlines()[-1])
    return {paths[name]: reason for name, reason in report.skipped_files if name in paths}


class Worker:
    """One worker: takes jobs one at a time until stopped."""

    def __init__(self, settings: Settings, pool: Any, embedder_factory: Callable[[], Embedder], name: str = "") -> None:
        self.settings = settings
        self.jobs = JobStore(pool)
        self.documents = SourceStore(pool)
        self.store = CorpusStore(pool)
        self.embedder_factory = embedder_factory
        self.name = name or f"{socket.gethostname()}-{uuid.uuid4().hex[:6]}"

    async def run_once(self) -> bool:
        job = await self.jobs.claim(self.name)
        if job is None:
            return False
        log.info("ingest job taken", job=job.id, corpus=job.corpus, kind=job.kind, attempt=job.attempts)
        beating = asyncio.create_task(self._heartbeat(job, asyncio.current_task()))
        try:
            await run_upload(
                job, self.name, self.jobs, self.documents, self.store, self.embedder_factory, self.settings
            )
        except asyncio.CancelledError:
            if beating.done() and beating.result() is False:
                log.warning("ingest job taken over by another worker; this one stops", job=job.id)
                return True
            raise
        except Exception as exc:
            log.exception("ingest job failed", job=job.id)
            await self.jobs.finish(job.id, self.name, "failed", [], error=str(exc) or type(exc).__name__)
        finally:
            beating.cancel()
        return True

    async def _heartbeat(self, job: Job, running: asyncio.Task[Any] | None) -> bool:
        """Touch the job while it runs, so no other worker takes it over; when it was taken over anyway (this
        worker was stalled past the lease), stop the work here: the other worker owns it now."""
        while True:
            await asyncio.sleep(LEASE_S / 4)
            if not await self.jobs.heartbeat(job.id, self.name, {}):
                if running is not None:
                    running.cancel()
                return False

    async def run(self) -> None:
        while True:
            try:
                if not await self.run_once():
                    await asyncio.sleep(POLL_S)
            except asyncio.CancelledError:
                raise
            except Exception:
                log.exception("ingest worker: the queue could not be read; trying again")
                await asyncio.sleep(POLL_S * 5)
