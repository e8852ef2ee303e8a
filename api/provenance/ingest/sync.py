"""A folder as a source of a corpus's documents. `provenance ingest DIR --corpus C` (and `serve --ingest` for
corpus/) makes the folder source's documents what the folder holds now (it adds, updates and removes only
those), keeps each one's bytes in Postgres, leaves the corpus's other documents (uploads, a crawled site) as
they are, and switches the corpus to all of them at once. A folder's documents keep their relative paths, so
their passages stay `{file}#{slug}`."""

from __future__ import annotations

import hashlib
import tempfile
from collections.abc import Callable
from pathlib import Path

from provenance.errors import ConfigurationError, CorpusConflict
from provenance.inference.embedder import Embedder
from provenance.ingest.describe import EXAMPLE_FILES
from provenance.ingest.documents.read import SUFFIXES, TEXT_SUFFIXES
from provenance.ingest.folder import IGNORE_MARKER, IngestReport, candidates, ingest
from provenance.store.corpora import CorpusStore
from provenance.store.sources import Document, SourceStore

FORMATS = {".md": "markdown", ".markdown": "markdown", ".txt": "text", ".html": "html", ".htm": "html"}


def document_format(name: str) -> str:
    suffix = Path(name).suffix.lower()
    return FORMATS.get(suffix, suffix.lstrip("."))


def _ignored(name: str, raw: bytes) -> bool:
    """A note that documents the corpus rather than belonging to it (its first line is the marker)."""
    suffix = Path(name).suffix.lower()
    return suffix in TEXT_SUFFIXES and raw.decode("utf-8", "replace").lstrip().startswith(IGNORE_MARKER)


async def sync_documents(sources: SourceStore, folder: Path, corpus: str) -> tuple[str, list[tuple[str, str]]]:
    """The folder source's documents made what the folder holds: (the source's id, files skipped with why)."""
    source = await sources.add_source(corpus, "folder", str(folder))
    held = {d.path: d for d in await sources.documents(corpus, source.id)}
    taken = {d.path for d in await sources.documents(corpus) if d.source_id != source.id}
    present: set[str] = set()
    skipped: list[tuple[str, str]] = []
    for name, path in candidates(folder):
        if Path(name).suffix.lower() not in SUFFIXES:
            continue  # ingest names it among the files it skipped
        raw = path.read_bytes()
        if _ignored(name, raw):
            continue
        if name in taken:
            skipped.append((name, "another source's document has this path in the corpus"))
            continue
        present.add(name)
        sha = hashlib.sha256(raw).hexdigest()
        if name in held and held[name].sha256 == sha:
            continue
        doc_id = hashlib.sha256(f"{source.id}:{name}".encode()).hexdigest()[:12]
        file_name = name.rsplit("/", 1)[-1]
        await sources.add(
            Document(corpus, doc_id, source.id, name, file_name, document_format(name), len(raw), sha), raw
        )
    await sources.remove(corpus, [d.id for path, d in held.items() if path not in present])
    return source.id, skipped


async def sync_folder(
    store: CorpusStore,
    sources: SourceStore,
    directory: Path,
    embedder_factory: Callable[[], Embedder],
    model_name: str,
    max_tokens: int,
    hnsw_min_passages: int,
    *,
    corpus: str,
    force: bool = False,
    replace: bool = False,
) -> IngestReport:
    folder = directory.resolve()
    if not folder.is_dir():
        raise ConfigurationError(f"corpus folder not found: {directory}")
    others = [s for s in await sources.sources(corpus) if s.kind == "folder" and s.location != str(folder)]
    if others and not replace:
        raise CorpusConflict(
            f"corpus {corpus} holds the documents of {others[0].location}; ingesting {folder} would replace them. "
            "Name another corpus (--corpus NAME) to keep both, or pass --replace to replace them."
        )
    for other in others:
        await sources.remove_source(other.id)
    source_id, taken = await sync_documents(sources, folder, corpus)
    rest = [(d, data) for d, data in await sources.originals(corpus) if d.source_id != source_id]
    args = (store, folder, embedder_factory, model_name, max_tokens, hnsw_min_passages)
    if not rest:
        # The folder alone: ingested where it lies, as before sources (an unchanged folder loads no embedder).
        report = await ingest(*args, force=force, corpus=corpus, replace=replace or bool(others))
    else:
        with tempfile.TemporaryDirectory(prefix="provenance-sync-") as tmp:
            root = Path(tmp)
            # The folder's files linked where they are (what describes the corpus too), the others written out.
            for name, path in candidates(folder):
                (root / name).parent.mkdir(parents=True, exist_ok=True)
                (root / name).symlink_to(path)
            for example in EXAMPLE_FILES:
                if (folder / example).is_file():
                    (root / example).symlink_to(folder / example)
            for doc, data in rest:
                (root / doc.path).parent.mkdir(parents=True, exist_ok=True)
                (root / doc.path).write_bytes(data)
            report = await ingest(store, root, *args[2:], force=force, corpus=corpus, replace=True, recorded_dir=folder)
    report.skipped_files += taken
    await sources.synced(source_id)
    return report
