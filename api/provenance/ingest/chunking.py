"""Split documents into passages: every heading bounds a passage, and each passage keeps its whole heading
path (title > `##` > `###` > ...), which is its breadcrumb; headings are never sentences of its text. Long
sections split at paragraph boundaries under a token cap, then at their sentence units (a list item, a
table row, a sentence; a code block is never split). Ids are stable: `file#slug` for a `##` section (as
they were when deeper headings stayed inside it), `file#slug--subslug` for a deeper one, with `-pN` when
split.

Why every heading and not only `##`: a passage has one breadcrumb, and the breadcrumb is what a sentence is
read with (retrieval, relevance, the local generator's choice). A `###` left inside its `##` passage would
give its sentences the parent's path, so "The company pays 100% of the premium" under Dental Insurance
would read as an answer about the medical premium. Measured on the 18F handbook (bench/heading_recall.py):
recall@4 34/38 either way, with other cases missed, so the narrower passages with the right breadcrumb win.

Every format reaches the chunker the same way, as blocks (`provenance.ingest.documents`); Markdown text goes
through its reader here, so `chunk_document` keeps working on text."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from provenance import text as T
from provenance.ingest.documents.blocks import CODE_INDENT, Block, Pages, merge_pages
from provenance.ingest.documents.markdown import read_markdown


@dataclass(frozen=True)
class Chunk:
    """A passage as the chunker cuts it, and as ingest hands it to `CorpusStore.replace_corpus`: the
    passages table's own columns, with the embedding passed beside it."""

    id: str
    source: str
    heading: str
    position: int
    text: str
    token_count: int
    # The pages of a paged source (PDF) the passage came from; None for the rest. Not part of the content
    # hash: a passage that only moved to another page needs no new embedding, only its pages updated.
    pages: Pages | None = None

    @property
    def content_hash(self) -> str:
        return hashlib.sha256(f"{self.heading}\n{self.text}".encode()).hexdigest()


def slugify(text: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug or "section"


@dataclass
class _Section:
    path: list[str]
    lines: list[Block]
    group: int = 0  # which `#`/`##` heading it is under, counted in order: its deeper sections share it
    group_depth: int = 1  # how much of `path` that heading's own: 1 for the title, 2 for a `##`


def _has_text(section: _Section) -> bool:
    return any(b.text.strip() for b in section.lines)


def _sections(blocks: Sequence[Block], title_fallback: str) -> list[_Section]:
    """Group lines by their heading path; `#` is the document title, and every heading starts a section."""
    sections: list[_Section] = []
    title = title_fallback
    current = _Section([title], [])
    path: list[str] = [title]  # title, then the open heading at each level below it
    levels: list[int] = [1]
    group, group_depth = 0, 1
    for block in blocks:
        if block.level:
            level, name = block.level, block.text
            if level == 1:
                title = name or title
                if not _has_text(current):
                    current = _Section([title], [])
                    path, levels = [title], [1]
                    continue
            if _has_text(current):
                sections.append(current)
            if level <= 2:
                group, group_depth = group + 1, min(level, 2)
            if level == 1:
                path, levels = [title], [1]
            else:
                while len(levels) > 1 and levels[-1] >= level:
                    levels.pop()
                    path.pop()
                path, levels = [*path, name], [*levels, level]
            current = _Section(list(path), [], group, group_depth)
            continue
        current.lines.append(block)
    if _has_text(current):
        sections.append(current)
    return sections


@dataclass(frozen=True)
class _Unit:
    """A paragraph, or a sentence of one too long to keep whole, with the pages it came from."""

    text: str
    pages: Pages | None


def _paragraphs(lines: list[Block]) -> list[list[_Unit]]:
    """Paragraphs, each as its lines (a list's items, a table's rows, a paragraph's one line)."""
    paragraphs: list[list[_Unit]] = []
    buf: list[_Unit] = []
    for line in [*lines, Block("")]:
        if line.text.strip():
            buf.append(_Unit(line.text.rstrip(), line.pages))
        elif buf:
            paragraphs.append(buf)
            buf = []
    return paragraphs


def _joined(lines: list[_Unit]) -> _Unit:
    return _Unit("\n".join(u.text for u in lines), merge_pages(u.pages for u in lines))


def _sentences(unit: _Unit) -> list[_Unit]:
    """A line too long to keep whole, as its sentences; a code block stays whole."""
    if unit.text.startswith(CODE_INDENT):
        return [unit]
    return [_Unit(unit.text[a:b], unit.pages) for a, b in T.sentence_spans(unit.text)] or [unit]


def chunk_document(source: str, text: str, count_tokens: Callable[[str], int], max_tokens: int = 256) -> list[Chunk]:
    """Markdown or plain text."""
    return chunk_blocks(source, read_markdown(text), count_tokens, max_tokens)


def chunk_blocks(
    source: str, blocks: Sequence[Block], count_tokens: Callable[[str], int], max_tokens: int = 256
) -> list[Chunk]:
    stem = source.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    chunks: list[Chunk] = []
    used_slugs: dict[str, int] = {}
    group_slugs: dict[int, str] = {}
    for section in _sections(blocks, title_fallback=stem):
        heading = " > ".join(section.path)
        if section.group not in group_slugs:
            # A `##` section (or the title's intro): numbered among its own kind, so a deeper heading
            # never moves the id of a `##` section that the evals and bookmarks name.
            top = slugify(section.path[1]) if section.group_depth > 1 else "intro"
            used_slugs[top] = used_slugs.get(top, 0) + 1
            group_slugs[section.group] = top if used_slugs[top] == 1 else f"{top}-{used_slugs[top]}"
        deeper = [slugify(name) for name in section.path[section.group_depth :]]
        base = "--".join([group_slugs[section.group], *deeper])
        if deeper:
            used_slugs[base] = used_slugs.get(base, 0) + 1
            if used_slugs[base] > 1:
                base = f"{base}-{used_slugs[base]}"
        parts = _pack(_paragraphs(section.lines), count_tokens, max_tokens)
        for i, part in enumerate(parts, start=1):
            pid = f"{source}#{base}" if len(parts) == 1 else f"{source}#{base}-p{i}"
            chunks.append(Chunk(pid, source, heading, len(chunks), part.text, count_tokens(part.text), part.pages))
    return chunks


def _pack(paragraphs: list[list[_Unit]], count_tokens: Callable[[str], int], max_tokens: int) -> list[_Unit]:
    """Greedily join paragraphs while under the cap; a paragraph over the cap splits into its lines, and a
    line over it into its sentences (each keeps its paragraph's pages: a line's position within a page is
    not kept). A code block is never split."""
    units: list[_Unit] = []
    for lines in paragraphs:
        whole = _joined(lines)
        if count_tokens(whole.text) <= max_tokens:
            units.append(whole)
            continue
        group: list[_Unit] = []
        for line in lines:
            pieces = [line] if count_tokens(line.text) <= max_tokens else _sentences(line)
            for piece in pieces:
                if group and count_tokens(_joined([*group, piece]).text) > max_tokens:
                    units.append(_joined(group))
                    group = []
                group.append(piece)
        if group:
            units.append(_joined(group))
    parts: list[_Unit] = []
    current: _Unit | None = None
    for unit in units:
        if current is None:
            current = unit
            continue
        candidate = _Unit(f"{current.text}\n\n{unit.text}", merge_pages([current.pages, unit.pages]))
        if count_tokens(candidate.text) > max_tokens:
            parts.append(current)
            current = unit
        else:
            current = candidate
    if current is not None:
        parts.append(current)
    return parts
