"""Ingest a folder of documents (Markdown, text, HTML, Word, PDF) into a named corpus: read each with its
format's reader, chunk, embed what changed, replace that corpus's passages in one transaction. A file that
can't be read is skipped with its reason, and the rest ingest. Other corpora are left alone; ingesting
another folder into a corpus replaces its contents only when asked to (`replace`)."""

from __future__ import annotations

import asyncio
import dataclasses
import hashlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

import msgspec
import numpy as np

from provenance import text as T
from provenance.claims.vectors import vocabulary_words
from provenance.errors import ConfigurationError, CorpusConflict, UnreadableDocument
from provenance.inference.embedder import LOCAL_DIM, Embedder
from provenance.ingest.chunking import Chunk, chunk_blocks
from provenance.ingest.describe import EXAMPLE_FILES, CorpusMeta, describe
from provenance.ingest.documents.blocks import Block, Document
from provenance.ingest.documents.read import SUFFIXES, TEXT_SUFFIXES, read_document
from provenance.ingest.reuse import Reuse
from provenance.report import ProgressBar
from provenance.store.corpora import CorpusDescription, CorpusState, CorpusStore, Staged, StagedState
from provenance.wire import DEFAULT_CORPUS, valid_name

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
    sentences_embedded: int = 0
    words_embedded: int = 0  # words of the passages no stored word vector had
    resumed: int = 0  # passages an interrupted run had staged, not embedded again
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
            f"embedded ({self.sentences_embedded} sentences), {self.deleted} removed{removed}; "
            f"corpus version {self.version}"
        )
        if self.resumed:
            lines.append(f"resumed an interrupted ingest: {self.resumed} passages were already staged")
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


# Texts are embedded in windows of this many passages (with their sentences), sorted by length within the
# window, then staged and dropped: memory holds one window, never the corpus.
EMBED_WINDOW = 64
# Passages that need nothing embedded (stored already with this content) ride in a window without counting
# towards it, up to this many in all: a rebuild that adds a few documents to many (an upload's job) would
# otherwise embed its new passages a handful a window, in batches far below BATCH_SIZE. Each is only its text.
WINDOW_ROWS = 16 * EMBED_WINDOW
# Parsed documents kept between the fingerprint pass and the chunking pass, up to this many characters; past
# it, a file is read again rather than held (a large corpus never sits in memory whole).
KEEP_PARSED_CHARS = 8_000_000


def candidates(directory: Path) -> list[tuple[str, Path]]:
    if not directory.is_dir():
        raise ConfigurationError(f"corpus folder not found: {directory}")
    out = []
    for path in sorted(directory.rglob("*")):
        if not path.is_file() or path.name.startswith("."):
            continue
        name = path.relative_to(directory).as_posix()
        if name in EXAMPLE_FILES:
            continue  # the corpus's example questions (provenance.pipeline.corpora), not a document
        out.append((name, path))
    return out


def _read_one(name: str, path: Path, reuse: Reuse | None = None) -> SourceFile | str | None:
    """The file read with its format's reader (or its parse found in `reuse`, by name and content); its reason
    when it can't be read (an unknown format, binary or non-UTF-8 text, empty, encrypted, scanned, corrupt);
    None for a note that documents the corpus."""
    raw = path.read_bytes()
    if path.suffix.lower() in TEXT_SUFFIXES and raw.decode("utf-8", "replace").lstrip().startswith(IGNORE_MARKER):
        return None
    raw_hash = hashlib.sha256(raw).hexdigest()
    parsed = reuse.parsed.get((name, raw_hash)) if reuse is not None else None
    if parsed is not None:
        return SourceFile(name, parsed[0], raw_hash, parsed[1])
    try:
        blocks = read_document(name, raw)
    except UnreadableDocument as exc:
        return str(exc)
    if not any(b.text.strip() for b in blocks):
        return "no text"
    text = raw.decode("utf-8").lstrip("\ufeff") if path.suffix.lower() in TEXT_SUFFIXES else ""
    source = SourceFile(name, text or Document(blocks).as_markdown(), raw_hash, blocks)
    if reuse is not None:
        reuse.parsed.put((name, raw_hash), (source.text, blocks))
    return source


def iter_sources(directory: Path, skipped: list[tuple[str, str]], reuse: Reuse | None = None) -> Iterator[SourceFile]:
    """Every readable document under directory, one at a time; what can't be read is added to `skipped`."""
    for name, path in candidates(directory):
        read = _read_one(name, path, reuse)
        if isinstance(read, str):
            skipped.append((name, read))
        elif read is not None:
            yield read


def read_sources(directory: Path) -> tuple[list[SourceFile], list[tuple[str, str]]]:
    """Every readable document under directory, all at once (evals and benches over small corpora)."""
    skipped: list[tuple[str, str]] = []
    return list(iter_sources(directory, skipped)), skipped


def _outline(text: str) -> str:
    """What `describe` reads of a document (its first `#` and first `##` line), so the description needs no
    document held whole."""
    title = next((ln for ln in text.splitlines() if ln.strip().startswith("# ")), "")
    section = next((ln for ln in text.splitlines() if ln.strip().startswith("## ")), "")
    return f"{title}\n{section}"


def fingerprint(files: Sequence[tuple[str, str]], model: str, max_tokens: int, meta: CorpusMeta | None = None) -> str:
    """What the corpus was made from: (file name, raw hash) of each file, the model, the chunker and the
    segmenter. The same fingerprint means nothing to compute."""
    h = hashlib.sha256(f"{model}|{max_tokens}|{CHUNKER_VERSION}|{T.SEGMENTER_VERSION}".encode())
    for name, raw_hash in files:
        h.update(f"\n{name}\0{raw_hash}".encode())
    if meta is not None:
        # A new description or example alone is a change to store, though nothing needs embedding.
        h.update(msgspec.json.encode(meta))
    return h.hexdigest()


def corpus_version(hashes: dict[str, str], model: str) -> str:
    """What keys the answer cache: the passages' ids and contents, the model and the segmenter."""
    h = hashlib.sha256(f"{model}|{T.SEGMENTER_VERSION}".encode())
    for pid in sorted(hashes):
        h.update(f"\n{pid}\0{hashes[pid]}".encode())
    return h.hexdigest()[:16]


def _needs(
    chunk: Chunk, model: str, stored: tuple[str, str, bool] | None, staged: StagedState | None
) -> tuple[bool, bool]:
    """Whether the passage's vector, and its sentences' vectors, must be computed: not when the served corpus
    holds them for this content and model, nor when an interrupted ingest staged them."""
    same_stored = stored is not None and stored[:2] == (chunk.content_hash, model)
    if staged is None or (staged.content_hash, staged.embedding_model) != (chunk.content_hash, model):
        return not same_stored, not (same_stored and stored is not None and stored[2])
    return (
        not same_stored and not staged.embedded,
        not (same_stored and stored is not None and stored[2]) and staged.sentences_segmenter != T.SEGMENTER_VERSION,
    )


@dataclass
class _Window:
    """Passages waiting to be staged: at most EMBED_WINDOW of them with something to embed, and at most
    WINDOW_ROWS in all."""

    rows: list[tuple[Chunk, bool, list[tuple[int, int]] | None]] = field(default_factory=list)
    # How many rows have their vector or their sentences' vectors to compute.
    to_embed: int = 0

    def __len__(self) -> int:
        return len(self.rows)

    def add(self, chunk: Chunk, passage: bool, spans: list[tuple[int, int]] | None) -> None:
        self.rows.append((chunk, passage, spans))
        self.to_embed += passage or bool(spans)

    @property
    def full(self) -> bool:
        return self.to_embed >= EMBED_WINDOW or len(self.rows) >= WINDOW_ROWS

    def clear(self) -> None:
        self.rows.clear()
        self.to_embed = 0


# A batch's attention memory grows with its size times the square of its longest text: at most this many
# texts times squared tokens (32 texts of 128 tokens; 8 of a full 256-token passage). Counted in tokens, not
# characters: a table, a list of links or code runs to 3 characters a token against prose's 4-5, and with
# the bound in characters the 18F handbook's largest batch held 19 passages of 256 tokens, 2.4 times this.
BATCH_CELLS = 32 * 128**2


def _batches(order: list[int], tokens: list[int], batch: int) -> Iterator[list[int]]:
    """`order`, cut into batches of at most `batch` texts whose count times the square of the longest
    text's tokens stays within BATCH_CELLS (a single text longer than that is a batch of its own)."""
    part: list[int] = []
    for i in order:
        longest = max(tokens[i], 1)
        if part and (len(part) >= batch or (len(part) + 1) * longest**2 > BATCH_CELLS):
            yield part
            part = []
        part.append(i)
    if part:
        yield part


def _embed_sorted(embedder: Embedder, texts: list[str], batch: int) -> list[np.ndarray]:
    """Vectors of `texts` in their order, embedded shortest first, in batches of at most `batch` and of
    bounded size times length squared: a batch pads to its longest text, so sorting bounds the padding, and
    the bound keeps a batch of long passages as small in memory as one of short sentences."""
    tokens = [embedder.count_tokens(t) for t in texts]
    order = sorted(range(len(texts)), key=lambda i: tokens[i])
    out: list[np.ndarray] = [np.empty(0, dtype=np.float32)] * len(texts)
    for part in _batches(order, tokens, batch):
        vectors = embedder.embed_documents([texts[i] for i in part])
        for i, v in zip(part, vectors, strict=True):
            out[i] = np.asarray(v, dtype=np.float32)
    return out


async def _flush(
    store: CorpusStore,
    corpus: str,
    model: str,
    embedder: Embedder,
    window: _Window,
    report: IngestReport,
    batch: int,
) -> None:
    """Embed what the window's passages need (the passage, its sentences) in one length-sorted pass, stage
    the window in one transaction, and empty it."""
    texts: list[str] = []
    for chunk, passage, spans in window.rows:
        if passage:
            texts.append(passage_text(chunk))
        texts.extend(chunk.text[a:b] for a, b in spans or ())
    vectors = iter(await asyncio.to_thread(_embed_sorted, embedder, texts, batch) if texts else [])
    staged = []
    for chunk, passage, spans in window.rows:
        vector = next(vectors) if passage else None
        sentences = None if spans is None else [(a, b, next(vectors)) for a, b in spans]
        staged.append(Staged(chunk, vector, sentences))
        report.embedded += passage
        report.sentences_embedded += len(spans or ())
    await store.stage(corpus, model, T.SEGMENTER_VERSION, staged)
    report.words_embedded += await _store_words(
        store, model, embedder, [passage_text(c) for c, _, spans in window.rows if spans], batch
    )
    window.clear()


async def _store_words(store: CorpusStore, model: str, embedder: Embedder, texts: Sequence[str], batch: int) -> int:
    """The vectors of the words these passages use that no stored vector has yet (the verifier's soft term
    matching reads them at start-up)."""
    words = sorted(set().union(*(vocabulary_words(t) for t in texts))) if texts else []
    missing = await store.missing_words(model, words) if words else []
    if missing:
        vectors = await asyncio.to_thread(_embed_sorted, embedder, missing, max(batch, 256))
        await store.write_words(model, list(zip(missing, vectors, strict=True)))
    return len(missing)


def passage_text(chunk: Chunk) -> str:
    """What a passage's vector is of: its heading (the section it is in) and its text."""
    return f"{chunk.heading}\n{chunk.text}"


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
    batch_size: int = 32,
    on_progress: Callable[[IngestReport, int], None] | None = None,
    recorded_dir: Path | None = None,
    cite: Callable[[str, str], str] | None = None,
    defer_sentences: bool = False,
    reuse: Reuse | None = None,
) -> IngestReport:
    """Ingest `directory` into `corpus`: files are read one at a time, passages and their sentences embedded
    in bounded windows and staged batch by batch, and the corpus switched over in one final transaction. An
    interrupted run leaves its staged rows, and the next run embeds only what they lack. `on_progress`: the
    report and files read so far, after each file (a job's progress). `recorded_dir`: the folder recorded as
    the corpus's when `directory` is a copy of its documents. `cite`: a passage's citation (`source`) from its
    file's name and heading (a crawled page's URL#fragment; else the file's name), not in its id or hash.

    `defer_sentences`: embed and stage only the passages' vectors, so the switch comes sooner; the new
    passages' sentence (and word) vectors are then the caller's to compute (`fill_missing_sentences` with
    the corpus), after the switch. An upload's job does this: sentences are 9 in 10 of the texts a document
    embeds, and answering needs none of them stored (the verifier embeds what the store lacks).

    `reuse`: documents parsed and chunked before, found there by name and content instead of read again (a
    worker's, across its jobs: each rebuilds its corpus from every document it holds)."""
    if not valid_name(corpus):
        raise ConfigurationError(
            f"corpus name {corpus!r}: use 1-40 lowercase letters, digits, '-' or '_', starting with a letter or digit"
        )
    # Pass 1: what the folder holds (names, hashes, outlines), so an unchanged corpus loads no embedder. Read
    # off the event loop, as the chunking and the embedder's load below are: in a worker inside the server,
    # that loop answers /ask meanwhile.
    survey = await asyncio.to_thread(_survey, directory, reuse)
    report = IngestReport(files=len(survey.hashes), skipped_files=survey.skipped, corpus=corpus)
    meta = await asyncio.to_thread(describe, directory, survey.outlines)
    survey.outlines = []
    fp = fingerprint(survey.hashes, model_name, max_tokens, meta)
    source_dir = str((recorded_dir or directory).resolve())
    state = await store.corpus_state(corpus)
    if _unchanged(state, report, source_dir, fp, model_name, force=force, replace=replace):
        return report
    embedder = await asyncio.to_thread(_embedder, embedder_factory, model_name)
    segmenter = T.SEGMENTER_VERSION
    live = {} if force else await store.stored_passages(corpus, segmenter, model_name)
    staged = await store.staged_passages(corpus)
    report.resumed = sum(1 for s in staged.values() if s.embedded or s.sentences_segmenter)
    # Pass 2: chunk each file, and embed and stage what is not stored or staged already.
    passes = _Staging(
        store, corpus, model_name, embedder, report, batch_size, live, staged, on_progress, cite, defer_sentences, reuse
    )
    await passes.stage_files(directory, survey, max_tokens)

    version = corpus_version(passes.content, model_name)
    _, removed = await store.switch_corpus(
        list(passes.content),
        model_name,
        segmenter,
        version,
        fp,
        [{"source": name, **counts} for name, counts in sorted(passes.per_file.items())],
        _description(corpus, source_dir, meta),
    )
    report.passages, report.version = len(passes.content), version
    report.removed, report.deleted = removed, sum(removed.values())
    if len(passes.content) >= hnsw_min_passages:
        report.hnsw_built = await store.ensure_hnsw_index()
    return report


def _embedder(embedder_factory: Callable[[], Embedder], model_name: str) -> Embedder:
    embedder = embedder_factory()
    if embedder.dim != LOCAL_DIM:
        raise ConfigurationError(
            f"EMBED_MODEL {model_name} makes {embedder.dim}-d vectors; the passages table stores {LOCAL_DIM}-d ones "
            "(db/migrations/002_passages.sql). Add a migration for the new size before switching."
        )
    return embedder


def _description(corpus: str, source_dir: str, meta: CorpusMeta) -> CorpusDescription:
    return CorpusDescription(
        name=corpus,
        source_dir=source_dir,
        title=meta.title,
        description=meta.description,
        examples=msgspec.to_builtins(meta.examples),
    )


@dataclass
class _Survey:
    """Pass 1's findings: each readable file's name and hash, its outline, the parsed files small enough to
    keep for pass 2, and the files skipped with their reasons."""

    hashes: list[tuple[str, str]] = field(default_factory=list)
    outlines: list[tuple[str, str]] = field(default_factory=list)
    kept: dict[str, SourceFile] = field(default_factory=dict)
    skipped: list[tuple[str, str]] = field(default_factory=list)


def _survey(directory: Path, reuse: Reuse | None = None) -> _Survey:
    survey = _Survey()
    kept_chars = 0
    for source in iter_sources(directory, survey.skipped, reuse):
        survey.hashes.append((source.name, source.raw_hash))
        survey.outlines.append((source.name, _outline(source.text)))
        size = sum(len(b.text) for b in source.blocks)
        if kept_chars + size <= KEEP_PARSED_CHARS:
            survey.kept[source.name], kept_chars = source, kept_chars + size
    if not survey.hashes:
        why = "\n".join(skipped_lines(survey.skipped))
        raise ConfigurationError(
            f"nothing to ingest in {directory}: no readable {', '.join(SUFFIXES)} files" + (f"\n{why}" if why else "")
        )
    return survey


def _unchanged(
    state: CorpusState | None,
    report: IngestReport,
    source_dir: str,
    fp: str,
    model_name: str,
    *,
    force: bool,
    replace: bool,
) -> bool:
    """Whether the corpus is already what the folder would make (the report then says so); a corpus
    ingested from another folder is a conflict unless `replace`."""
    if state and state.source_dir and state.source_dir != source_dir:
        if not replace:
            raise CorpusConflict(
                f"corpus {report.corpus} holds {state.passage_count} passages from {state.source_dir}; ingesting "
                f"{source_dir} would replace them. Name another corpus (--corpus NAME) to keep both, or pass "
                "--replace to replace them."
            )
        report.replaced_from = state.source_dir
    # A corpus that doesn't know its folder yet (ingested before it was recorded) gets one full pass, which
    # embeds nothing unchanged and records the folder and the description.
    same_folder = state is not None and state.source_dir == source_dir
    if state and same_folder and not force and state.fingerprint == fp and state.embedding_model == model_name:
        # Same files, same model, same segmenter: skip without even loading the embedder (a restart stays fast).
        report.unchanged, report.passages, report.version = True, state.passage_count, state.version
        return True
    return False


class _Staging:
    """Pass 2: each file chunked, and what is not stored or staged already embedded and staged, window by
    window; `content` (passage id -> content hash) and `per_file` are what the switch records."""

    def __init__(
        self,
        store: CorpusStore,
        corpus: str,
        model_name: str,
        embedder: Embedder,
        report: IngestReport,
        batch_size: int,
        live: dict[str, tuple[str, str, bool]],
        staged: dict[str, StagedState],
        on_progress: Callable[[IngestReport, int], None] | None = None,
        cite: Callable[[str, str], str] | None = None,
        defer_sentences: bool = False,
        reuse: Reuse | None = None,
    ) -> None:
        self.on_progress, self.cite, self.defer_sentences, self.reuse = on_progress, cite, defer_sentences, reuse
        self.store, self.corpus, self.model_name, self.embedder = store, corpus, model_name, embedder
        self.report, self.batch_size, self.live, self.staged = report, batch_size, live, staged
        self.content: dict[str, str] = {}  # passage id -> content hash: the corpus version, and duplicate ids
        self.per_file: dict[str, dict[str, int]] = {}
        self.window = _Window()

    async def stage_files(self, directory: Path, survey: _Survey, max_tokens: int) -> None:
        progress = ProgressBar(len(survey.hashes), "ingesting files")
        for done, (name, _) in enumerate(survey.hashes, 1):
            for chunk in await asyncio.to_thread(self._chunks, directory, survey, name, max_tokens):
                await self._add(chunk)
            progress.advance()
            if self.on_progress is not None:
                self.report.passages = len(self.content)
                self.on_progress(self.report, done)
        if self.window:
            await self._flush()
        if self.on_progress is not None:
            self.on_progress(self.report, len(survey.hashes))
        progress.close()

    def _chunks(self, directory: Path, survey: _Survey, name: str, max_tokens: int) -> list[Chunk]:
        """One file's passages, read again unless pass 1 kept it, and cut again unless `reuse` has them."""
        doc = survey.kept.pop(name, None) or _read_one(name, directory / name, self.reuse)
        if not isinstance(doc, SourceFile):  # changed since pass 1
            raise ConfigurationError(f"{name} changed while it was being ingested; run the ingest again")
        # What cuts a document's passages: its name (their ids), its content, the limit and the tokenizer.
        key = (doc.name, doc.raw_hash, max_tokens, self.model_name)
        cut = self.reuse.chunks.get(key) if self.reuse is not None else None
        if cut is None:
            cut = tuple(chunk_blocks(doc.name, doc.blocks, self.embedder.count_tokens, max_tokens))
            if self.reuse is not None:
                self.reuse.chunks.put(key, cut)
        if self.cite is None:
            return list(cut)
        cite = self.cite
        return [dataclasses.replace(c, source=cite(doc.name, c.heading)) for c in cut]

    async def _add(self, chunk: Chunk) -> None:
        if chunk.id in self.content:
            raise ConfigurationError(f"duplicate passage id: {chunk.id}")
        self.content[chunk.id] = chunk.content_hash
        entry = self.per_file.setdefault(chunk.source, {"passages": 0, "tokens": 0})
        entry["passages"] += 1
        entry["tokens"] += chunk.token_count
        need_passage, need_sentences = _needs(
            chunk, self.model_name, self.live.get(chunk.id), self.staged.get(chunk.id)
        )
        need_sentences = need_sentences and not self.defer_sentences
        self.window.add(chunk, need_passage, T.sentence_spans(chunk.text) if need_sentences else None)
        if self.window.full:
            await self._flush()

    async def _flush(self) -> None:
        await _flush(self.store, self.corpus, self.model_name, self.embedder, self.window, self.report, self.batch_size)


def _sentence_vectors(
    embedder: Embedder, texts: Sequence[str], batch_size: int
) -> tuple[list[list[tuple[int, int]]], list[np.ndarray]]:
    """Each text's sentence spans, and the vectors of all their sentences in order."""
    spans = [T.sentence_spans(text) for text in texts]
    return spans, _embed_sorted(embedder, [t[a:b] for t, s in zip(texts, spans, strict=True) for a, b in s], batch_size)


async def fill_missing_sentences(
    store: CorpusStore,
    embedder_factory: Callable[[], Embedder],
    model_name: str,
    batch_size: int = 32,
    stream: TextIO | None = None,
    *,
    corpus: str | None = None,
    on_progress: Callable[[int, int], None] | None = None,
) -> int:
    """Compute, once, the sentence vectors (and the words' vectors) of stored passages that have none for this
    model and segmenter (a database ingested before they were stored, or before the segmenter changed; an
    upload's passages, after its job's switch), with a progress bar; `corpus`: only that corpus's. Each window
    of passages is written in one transaction, so a run stopped part way keeps what it wrote and the next
    computes only the rest. `on_progress`: (passages filled, passages to fill) after each window. Returns how
    many passages it filled; 0, without loading the embedder, when none lacks them."""
    segmenter = T.SEGMENTER_VERSION
    total = await store.count_missing_sentences(segmenter, model_name, corpus)
    if not total:
        return 0
    embedder = await asyncio.to_thread(embedder_factory)
    progress = ProgressBar(total, "computing sentence vectors (once)", stream)
    after, done = ("", ""), 0
    if on_progress is not None:
        on_progress(0, total)
    while True:
        rows = await store.missing_sentences(segmenter, model_name, after, EMBED_WINDOW, corpus)
        if not rows:
            break
        # Split and embedded off the event loop: the segmenter costs about 6 ms a passage, and in a worker inside
        # the server that loop answers /ask meanwhile.
        spans, embedded = await asyncio.to_thread(_sentence_vectors, embedder, [r[2] for r in rows], batch_size)
        vectors = iter(embedded)
        await store.write_sentences(
            segmenter,
            model_name,
            [(c, pid, [(a, b, next(vectors)) for a, b in s]) for (c, pid, _, _), s in zip(rows, spans, strict=True)],
        )
        words_of = [f"{heading}\n{text}" for _, _, text, heading in rows]
        await _store_words(store, model_name, embedder, words_of, batch_size)
        after = rows[-1][:2]
        done += len(rows)
        progress.advance(len(rows))
        if on_progress is not None:
            on_progress(done, total)
    progress.close()
    return done
