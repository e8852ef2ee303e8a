"""Split documents into passages: `##` headings are hard boundaries, long sections split at paragraph
boundaries under a token cap. Ids are stable: `file#slug`, with `-pN` when split.

Every format reaches the chunker the same way, as blocks (`provenance.documents`); Markdown text goes
through its reader here, so `chunk_document` keeps working on text."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from provenance.documents.blocks import Block, Pages, merge_pages
from provenance.documents.markdown import read_markdown


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


def _has_text(section: _Section) -> bool:
    return any(b.text.strip() for b in section.lines)


def _sections(blocks: Sequence[Block], title_fallback: str) -> list[_Section]:
    """Group lines by their heading path; `#` is the document title, `##` starts a section."""
    sections: list[_Section] = []
    title = title_fallback
    current = _Section([title], [])
    for block in blocks:
        if block.level:
            level, name = block.level, block.text
            if level == 1:
                title = name or title
                if not _has_text(current):
                    current = _Section([title], [])
                    continue
            if level <= 2:
                if _has_text(current):
                    sections.append(current)
                current = _Section([title] if level == 1 else [title, name], [])
                continue
            # Deeper headings stay inside their section as text so the sentence context survives.
            current.lines.append(Block(name + ".", 0, block.pages))
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


def _paragraphs(lines: list[Block]) -> list[_Unit]:
    paragraphs: list[_Unit] = []
    buf: list[Block] = []
    for line in [*lines, Block("")]:
        if line.text.strip():
            buf.append(line)
        elif buf:
            paragraphs.append(_Unit("\n".join(b.text.rstrip() for b in buf), merge_pages(b.pages for b in buf)))
            buf = []
    return paragraphs


def _sentences(paragraph: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])", paragraph) if s.strip()]


def chunk_document(source: str, text: str, count_tokens: Callable[[str], int], max_tokens: int = 256) -> list[Chunk]:
    """Markdown or plain text."""
    return chunk_blocks(source, read_markdown(text), count_tokens, max_tokens)


def chunk_blocks(
    source: str, blocks: Sequence[Block], count_tokens: Callable[[str], int], max_tokens: int = 256
) -> list[Chunk]:
    stem = source.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    chunks: list[Chunk] = []
    used_slugs: dict[str, int] = {}
    for section in _sections(blocks, title_fallback=stem):
        heading = " > ".join(section.path)
        base = slugify(section.path[-1]) if len(section.path) > 1 else "intro"
        used_slugs[base] = used_slugs.get(base, 0) + 1
        if used_slugs[base] > 1:
            base = f"{base}-{used_slugs[base]}"
        parts = _pack(_paragraphs(section.lines), count_tokens, max_tokens)
        for i, part in enumerate(parts, start=1):
            pid = f"{source}#{base}" if len(parts) == 1 else f"{source}#{base}-p{i}"
            chunks.append(Chunk(pid, source, heading, len(chunks), part.text, count_tokens(part.text), part.pages))
    return chunks


def _pack(paragraphs: list[_Unit], count_tokens: Callable[[str], int], max_tokens: int) -> list[_Unit]:
    """Greedily join paragraphs while under the cap; a single paragraph over the cap splits by sentence
    (each sentence keeps its paragraph's pages: a line's position within a page is not kept)."""
    units: list[_Unit] = []
    for paragraph in paragraphs:
        if count_tokens(paragraph.text) <= max_tokens:
            units.append(paragraph)
        else:
            units.extend(_Unit(s, paragraph.pages) for s in _sentences(paragraph.text))
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
