"""Ingest a folder of documents (Markdown, text, HTML, Word, PDF) into a named corpus: read each with its
format's reader, chunk, embed what changed, replace that corpus's passages in one transaction. A file that
can't be read is skipped with its reason, and the rest ingest. Other corpora are left alone; ingesting
another folder into a corpus replaces its contents only when asked to (`replace`)."""

from __future__ import annotations

import hashlib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import msgspec
import numpy as np

from provenance import text as T
from provenance.chunking import Chunk, chunk_blocks
from provenance.corpora import DEFAULT_CORPUS, EXAMPLE_FILES, CorpusMeta, describe, valid_name
from provenance.documents.blocks import Block, Document
from provenance.documents.read import SUFFIXES, TEXT_SUFFIXES, read_document
from provenance.embedder import Embedder
from provenance.errors import ConfigurationError, CorpusConflict, UnreadableDocument
from provenance.progress import Progress
from provenance.store import CorpusDescription, CorpusStore

# A file whose first line is this marker documents the corpus rather than belonging to it (COVERAGE.md).
IGNORE_MARKER = "<!-- provenance: ignore -->"
# 2: Markdown read by a CommonMark parser, every heading a passage with its whole path (issue 33).
CHUNKER_VERSION = "2"
REMOVED_SHOWN = 5


@dataclass
class SourceFile:
    name: str
    text: str  # Markdown: the file as written; other formats: their outline as Markdown (for `describe`)
    raw_hash: str
    blocks: list[Block] = field(default_factory=list)


@dataclass
class IngestReport:
    files: int = 0
    passages: int = 0
    embedded: int = 0
    deleted: int = 0
    skipped_files: list[tuple[str, str]] = field(default_factory=list)
    version: str | None = None
    unchanged: bool = False
    hnsw_built: bool = False
    corpus: str = DEFAULT_CORPUS
    removed: dict[str, int] = field(default_factory=dict)  # source file -> passages removed
    replaced_from: str | None = None  # the folder whose documents this ingest replaced

    def summary(self) -> str:
        if self.unchanged:
            return "\n".join(
                [
                    f"corpus {self.corpus} unchanged ({self.passages} passages, version {self.version}); "
                    "nothing embedded",
                    *skipped_lines(self.skipped_files),
                ]
            )
        lines = []
        if self.replaced_from:
            lines.append(f"replacing corpus {self.corpus}: its documents came from {self.replaced_from}")
        removed = ""
        if self.removed:
            shown = [f"{name}: {n}" for name, n in list(self.removed.items())[:REMOVED_SHOWN]]
            if len(self.removed) > REMOVED_SHOWN:
                shown.append(f"and {len(self.removed) - REMOVED_SHOWN} more files")
            removed = f" ({', '.join(shown)})"
        lines.append(
            f"ingested {self.files} files into corpus {self.corpus}: {self.passages} passages, {self.embedded} "
            f"embedded, {self.deleted} removed{removed}; corpus version {self.version}"
        )
        lines += skipped_lines(self.skipped_files)
        if self.hnsw_built:
            lines.append("built the HNSW index")
        return "\n".join(lines)


def skipped_lines(skipped: list[tuple[str, str]]) -> list[str]:
    """The summary's account of what was not ingested: one line a file, with its reason."""
    if not skipped:
        return []
    return [f"skipped {len(skipped)} file{'s' if len(skipped) > 1 else ''}:"] + [
        f"  {name}: {why}" for name, why in skipped
    ]


def read_sources(directory: Path) -> tuple[list[SourceFile], list[tuple[str, str]]]:
    """Read every document under directory with its format's reader; a file that can't be read (an unknown
    format, binary or non-UTF-8 text, empty, encrypted, scanned, corrupt) is reported, not fatal."""
    if not directory.is_dir():
        raise ConfigurationError(f"corpus folder not found: {directory}")
    files: list[SourceFile] = []
    skipped: list[tuple[str, str]] = []
    for path in sorted(directory.rglob("*")):
        if not path.is_file() or path.name.startswith("."):
            continue
        name = path.relative_to(directory).as_posix()
        if name in EXAMPLE_FILES:
            continue  # the corpus's example questions (provenance.corpora), not a document
        raw = path.read_bytes()
        if path.suffix.lower() in TEXT_SUFFIXES and raw.decode("utf-8", "replace").lstrip().startswith(IGNORE_MARKER):
            continue
        try:
            blocks = read_document(name, raw)
        except UnreadableDocument as exc:
            skipped.append((name, str(exc)))
            continue
        if not any(b.text.strip() for b in blocks):
            skipped.append((name, "no text"))
            continue
        text = raw.decode("utf-8").lstrip("\ufeff") if path.suffix.lower() in TEXT_SUFFIXES else ""
        files.append(SourceFile(name, text or Document(blocks).as_markdown(), hashlib.sha256(raw).hexdigest(), blocks))
    return files, skipped


def fingerprint(files: list[SourceFile], model: str, max_tokens: int, meta: CorpusMeta | None = None) -> str:
    h = hashlib.sha256(f"{model}|{max_tokens}|{CHUNKER_VERSION}|{T.SEGMENTER_VERSION}".encode())
    for f in files:
        h.update(f"\n{f.name}\0{f.raw_hash}".encode())
    if meta is not None:
        # A new description or example alone is a change to store, though nothing needs embedding.
        h.update(msgspec.json.encode(meta))
    return h.hexdigest()


def passage_spans(chunk: Chunk) -> list[tuple[int, int]]:
    """A passage's sentence units, decided once here and stored: what every later stage reads as its
    sentences (claims' evidence, the generator's candidates, the closest sentence on a refusal)."""
    return T.sentence_spans(chunk.text)


def corpus_version(chunks: list[Chunk], model: str) -> str:
    h = hashlib.sha256(model.encode())
    for c in sorted(chunks, key=lambda c: c.id):
        h.update(f"\n{c.id}\0{c.content_hash}".encode())
    return h.hexdigest()[:16]


async def ingest(
    store: CorpusStore,
    directory: Path,
    embedder_factory: Callable[[], Embedder],
    model_name: str,
    max_tokens: int = 256,
    hnsw_min_passages: int = 20_000,
    force: bool = False,
    corpus: str = DEFAULT_CORPUS,
    replace: bool = False,
) -> IngestReport:
    if not valid_name(corpus):
        raise ConfigurationError(
            f"corpus name {corpus!r}: use 1-40 lowercase letters, digits, '-' or '_', starting with a letter or digit"
        )
    files, skipped = read_sources(directory)
    report = IngestReport(files=len(files), skipped_files=skipped, corpus=corpus)
    if not files:
        why = "\n".join(skipped_lines(skipped))
        raise ConfigurationError(
            f"nothing to ingest in {directory}: no readable {', '.join(SUFFIXES)} files" + (f"\n{why}" if why else "")
        )
    meta = describe(directory, [(f.name, f.text) for f in files])
    fp = fingerprint(files, model_name, max_tokens, meta)
    source_dir = str(directory.resolve())
    state = await store.corpus_state(corpus)
    if state and state.source_dir and state.source_dir != source_dir:
        if not replace:
            raise CorpusConflict(
                f"corpus {corpus} holds {state.passage_count} passages from {state.source_dir}; ingesting "
                f"{source_dir} would replace them. Name another corpus (--corpus NAME) to keep both, or pass "
                "--replace to replace them."
            )
        report.replaced_from = state.source_dir
    # A corpus that doesn't know its folder yet (ingested before it was recorded) gets one full pass, which
    # embeds nothing unchanged and records the folder and the description.
    same_folder = state is not None and state.source_dir == source_dir
    if state and same_folder and not force and state.fingerprint == fp and state.embedding_model == model_name:
        # Same files, same model: skip without even loading the embedder (a restart stays fast).
        report.unchanged, report.passages, report.version = True, state.passage_count, state.version
        return report

    embedder = embedder_factory()
    if embedder.dim != 384:
        raise ConfigurationError(
            f"EMBED_MODEL {model_name} makes {embedder.dim}-d vectors; the passages table stores 384-d ones "
            "(db/migrations/002_passages.sql). Add a migration for the new size before switching."
        )
    chunks: list[Chunk] = []
    for f in files:
        chunks.extend(chunk_blocks(f.name, f.blocks, embedder.count_tokens, max_tokens))
    ids = [c.id for c in chunks]
    if len(set(ids)) != len(ids):
        dupes = sorted({i for i in ids if ids.count(i) > 1})
        raise ConfigurationError(f"duplicate passage ids: {', '.join(dupes[:5])}")

    stored = await store.stored_hashes(corpus)
    todo = [c for c in chunks if force or stored.get(c.id) != (c.content_hash, model_name)]
    embeddings: dict[str, np.ndarray] = {}
    progress = Progress(len(todo), "embedding")
    batch = 32
    for start in range(0, len(todo), batch):
        part = todo[start : start + batch]
        vectors = embedder.embed_documents([f"{c.heading}\n{c.text}" for c in part])
        embeddings.update({c.id: v for c, v in zip(part, vectors, strict=True)})
        progress.advance(len(part))
    progress.close()

    version = corpus_version(chunks, model_name)
    per_file: dict[str, dict[str, int]] = {}
    for c in chunks:
        entry = per_file.setdefault(c.source, {"passages": 0, "tokens": 0})
        entry["passages"] += 1
        entry["tokens"] += c.token_count
    upserted, removed = await store.replace_corpus(
        chunks,
        embeddings,
        model_name,
        version,
        fp,
        [{"source": name, **counts} for name, counts in sorted(per_file.items())],
        CorpusDescription(
            name=corpus,
            source_dir=source_dir,
            title=meta.title,
            description=meta.description,
            examples=msgspec.to_builtins(meta.examples),
        ),
    )
    await store.write_sentence_spans(
        corpus, T.SEGMENTER_VERSION, {c.id: passage_spans(c) for c in chunks}, changed=[c.id for c in todo]
    )
    report.passages, report.embedded, report.version = len(chunks), upserted, version
    report.removed, report.deleted = removed, sum(removed.values())
    if len(chunks) >= hnsw_min_passages:
        report.hnsw_built = await store.ensure_hnsw_index()
    return report
