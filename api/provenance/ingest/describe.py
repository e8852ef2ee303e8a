"""What a corpus is, read from its own folder, so the page and other apps can say what they
answer from.

Title and description come from an optional README.md at the folder's root, else from the documents'
top headings; example questions from an optional examples.json or examples.txt, else from the section
headings."""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import msgspec

from provenance.errors import ConfigurationError
from provenance.wire import CorpusExample

README = "README.md"
# Questions, not facts: never ingested, or each example would retrieve itself.
EXAMPLE_FILES = ("examples.json", "examples.txt")
MAX_EXAMPLES = 6
MAX_DESCRIPTION_CHARS = 300
_TITLE = re.compile(r"^#\s+(.+?)\s*#*\s*$")


class CorpusMeta(msgspec.Struct, frozen=True):
    title: str
    description: str
    examples: list[CorpusExample]


def describe(directory: Path, documents: Sequence[tuple[str, str]]) -> CorpusMeta:
    """The corpus's title, description and examples. `documents` are (file name, text) of what is ingested,
    in the order ingest reads them."""
    title, description = _readme(directory)
    titles = _document_titles(documents)
    if not title and len(titles) == 1:
        title = titles[0]
    # Else no title: readers show the corpus's name. The folder's name is no title: an upload's is a staging
    # directory's random name, and `provenance ingest ./docs` would call every corpus "docs".
    if not description and titles:
        shown = titles[:8]
        more = f", and {len(titles) - len(shown)} more" if len(titles) > len(shown) else ""
        description = f"Covers {', '.join(shown)}{more}."
    examples = _examples_file(directory)
    if examples is None:
        examples = _derived_examples(documents)
    return CorpusMeta(title=title, description=_shorten(description), examples=examples[:MAX_EXAMPLES])


def _readme(directory: Path) -> tuple[str, str]:
    path = directory / README
    if not path.is_file():
        return "", ""
    try:
        lines = path.read_text(encoding="utf-8").lstrip("\ufeff").splitlines()
    except UnicodeDecodeError:
        return "", ""
    title = ""
    paragraph: list[str] = []
    for line in lines:
        stripped = line.strip()
        if stripped.startswith("<!--"):
            continue
        match = _TITLE.match(stripped)
        if match and not title and not paragraph:
            title = match.group(1)
            continue
        if stripped.startswith("#"):
            if paragraph:
                break
            continue
        if stripped:
            paragraph.append(stripped)
        elif paragraph:
            break
    return title, " ".join(paragraph)


def _document_titles(documents: Sequence[tuple[str, str]]) -> list[str]:
    titles: list[str] = []
    for _, text in documents:
        for line in text.splitlines():
            match = _TITLE.match(line.strip())
            if match:
                if match.group(1) not in titles:
                    titles.append(match.group(1))
                break
    return titles


def _examples_file(directory: Path) -> list[CorpusExample] | None:
    for name in EXAMPLE_FILES:
        path = directory / name
        if not path.is_file():
            continue
        raw = path.read_bytes()
        if name.endswith(".json"):
            try:
                items = msgspec.json.decode(raw, type=list[str | CorpusExample])
            except msgspec.ValidationError as exc:
                raise ConfigurationError(
                    f"{path}: {exc}; it should be a list of questions, each a string or "
                    '{"question": "...", "covered": false}'
                ) from None
            except msgspec.DecodeError as exc:
                raise ConfigurationError(f"{path} is not valid JSON: {exc}") from None
            examples = [CorpusExample(question=i) if isinstance(i, str) else i for i in items]
        else:
            lines = raw.decode("utf-8", errors="replace").splitlines()
            examples = [CorpusExample(question=s) for s in (line.strip() for line in lines) if s and s[0] != "#"]
        examples = [e for e in examples if e.question.strip()]
        if not examples:
            raise ConfigurationError(f"{path} holds no questions")
        return examples
    return None


def _derived_examples(documents: Sequence[tuple[str, str]]) -> list[CorpusExample]:
    """One question per document, about its first `##` section, so every example is about something the
    corpus holds (whether the answer is specific enough is up to the pipeline, as for any question)."""
    examples: list[CorpusExample] = []
    for _, text in documents:
        for line in text.splitlines():
            stripped = line.strip()
            if stripped.startswith("## "):
                examples.append(CorpusExample(question=f"What do the documents say about {stripped[3:].strip()}?"))
                break
        if len(examples) == 3:
            break
    return examples


def _shorten(text: str) -> str:
    text = " ".join(text.split())
    if len(text) <= MAX_DESCRIPTION_CHARS:
        return text
    return text[: MAX_DESCRIPTION_CHARS - 1].rsplit(" ", 1)[0] + "…"
