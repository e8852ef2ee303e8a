"""Split Markdown/text documents into passages: `##` headings are hard boundaries, long sections split
at paragraph boundaries under a token cap. Ids are stable: `file#slug`, with `-pN` when split."""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


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

    @property
    def content_hash(self) -> str:
        return hashlib.sha256(f"{self.heading}\n{self.text}".encode()).hexdigest()


def slugify(text: str) -> str:
    slug = re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")
    return slug or "section"


@dataclass
class _Section:
    path: list[str]
    lines: list[str]


def _sections(text: str, title_fallback: str) -> list[_Section]:
    """Group lines by their heading path; `#` is the document title, `##` starts a section."""
    sections: list[_Section] = []
    title = title_fallback
    current = _Section([title], [])
    in_fence = False
    for line in text.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
        match = None if in_fence else _HEADING.match(line)
        if match:
            level, name = len(match.group(1)), match.group(2).strip()
            if level == 1:
                title = name or title
                if not any(s.strip() for s in current.lines):
                    current = _Section([title], [])
                    continue
            if level <= 2:
                if any(s.strip() for s in current.lines):
                    sections.append(current)
                current = _Section([title] if level == 1 else [title, name], [])
                continue
            # Deeper headings stay inside their section as text so the sentence context survives.
            current.lines.append(name + ".")
            continue
        current.lines.append(line)
    if any(s.strip() for s in current.lines):
        sections.append(current)
    return sections


def _paragraphs(lines: list[str]) -> list[str]:
    paragraphs: list[str] = []
    buf: list[str] = []
    for line in lines:
        if line.strip():
            buf.append(line.rstrip())
        elif buf:
            paragraphs.append("\n".join(buf))
            buf = []
    if buf:
        paragraphs.append("\n".join(buf))
    return paragraphs


def _sentences(paragraph: str) -> list[str]:
    return [s for s in re.split(r"(?<=[.!?])\s+(?=[A-Z0-9\"'(])", paragraph) if s.strip()]


def chunk_document(source: str, text: str, count_tokens: Callable[[str], int], max_tokens: int = 256) -> list[Chunk]:
    stem = source.rsplit("/", 1)[-1].rsplit(".", 1)[0]
    chunks: list[Chunk] = []
    used_slugs: dict[str, int] = {}
    for section in _sections(text, title_fallback=stem):
        heading = " > ".join(section.path)
        base = slugify(section.path[-1]) if len(section.path) > 1 else "intro"
        used_slugs[base] = used_slugs.get(base, 0) + 1
        if used_slugs[base] > 1:
            base = f"{base}-{used_slugs[base]}"
        parts = _pack(_paragraphs(section.lines), count_tokens, max_tokens)
        for i, part in enumerate(parts, start=1):
            pid = f"{source}#{base}" if len(parts) == 1 else f"{source}#{base}-p{i}"
            chunks.append(Chunk(pid, source, heading, len(chunks), part, count_tokens(part)))
    return chunks


def _pack(paragraphs: list[str], count_tokens: Callable[[str], int], max_tokens: int) -> list[str]:
    """Greedily join paragraphs while under the cap; a single paragraph over the cap splits by sentence."""
    units: list[str] = []
    for paragraph in paragraphs:
        if count_tokens(paragraph) <= max_tokens:
            units.append(paragraph)
        else:
            units.extend(_sentences(paragraph))
    parts: list[str] = []
    current = ""
    for unit in units:
        candidate = f"{current}\n\n{unit}" if current else unit
        if current and count_tokens(candidate) > max_tokens:
            parts.append(current)
            current = unit
        else:
            current = candidate
    if current:
        parts.append(current)
    return parts
