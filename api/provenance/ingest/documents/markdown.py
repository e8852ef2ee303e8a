"""Markdown and plain text, read by a CommonMark parser (markdown-it-py, with its table and front-matter
plugins): the passage holds the words a reader of the rendered page sees, and nothing of the syntax.

- A link keeps its text and drops its address; an image is its alt text; emphasis, strong, strike-through and
  code-span markers go, the characters inside them stay ("C#", `a|b`, "5 * 3" are text, not syntax).
- Raw HTML is its text; HTML comments go. Template tags (`{% ... %}`, `{{ ... }}`, as Jekyll and Liquid
  sites write them) are dropped before parsing, outside fenced code.
- YAML front matter gives the title when it has one (`title:`) and is otherwise dropped.
- A paragraph is one line, however the file wrapped it. Each list item is a line of its own (a sentence
  unit, ended even without a final period), bulleted "•" (ordered lists keep their numbers), nested ones
  indented two spaces a level.
- A table is read row by row, each row one sentence that names its columns ("Day: Monday, Hours: 10.").
- A fenced or indented code block stays whole: one block, each line indented four spaces, never split into
  sentences (`provenance.text.sentence_spans`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from markdown_it import MarkdownIt
from markdown_it.token import Token
from mdit_py_plugins.front_matter import front_matter_plugin

from provenance.ingest.documents.blocks import BLANK, CODE_INDENT, Block, bullet, collapse, table_sentences
from provenance.ingest.documents.html import read_html_fragment

_PARSER = MarkdownIt("commonmark").enable(["table", "strikethrough"]).use(front_matter_plugin)
_DROPPED = "\ue000"  # a private-use character: where a template tag was, until the line is parsed
_TEMPLATE_TAG = re.compile(r"\{%.*?%\}|\{\{.*?\}\}", re.DOTALL)
# A line that holds only tags renders as nothing: it goes whole, so it neither ends a paragraph nor an HTML
# block (a blank line would end both).
_TAG_LINES = re.compile(r"^[ \t]*(?:(?:\{%.*?%\}|\{\{.*?\}\})[ \t]*)+(?:\n|$)", re.DOTALL | re.MULTILINE)
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_TITLE = re.compile(r"""^title:\s*(["']?)(.*?)\1\s*$""", re.MULTILINE)
_HEADING_LEVEL = {f"h{n}": n for n in range(1, 7)}


def drop_template_tags(text: str) -> str:
    """The text without `{% ... %}` and `{{ ... }}`, except inside fenced code, where they may be the
    example. A line of nothing but tags is dropped with its line break; a tag within a line leaves a
    placeholder the reader drops once the line is parsed, so what was around it parses as written
    (`**in {% channel %}**` is still strong, `[text]({% page %})` still a link)."""
    out: list[str] = []
    fence: str | None = None
    outside: list[str] = []

    def flush() -> None:
        if outside:
            joined = "".join(outside)
            out.append(_TEMPLATE_TAG.sub(_DROPPED, _TAG_LINES.sub("", joined)))
            outside.clear()

    for line in text.splitlines(keepends=True):
        match = _FENCE.match(line)
        if fence is None:
            if match:
                flush()
                fence = match.group(1)[0] * 3
                out.append(line)
            else:
                outside.append(line)
        else:
            out.append(line)
            if match and match.group(1).startswith(fence):
                fence = None
    flush()
    return "".join(out)


def inline_text(tokens: Sequence[Token] | None) -> str:
    """An inline run as it reads: text, code spans' contents, links' text, images' alt text; line breaks are
    spaces and raw inline HTML is dropped, its text (between the tags) kept."""
    parts: list[str] = []
    for tok in tokens or []:
        if tok.type in ("text", "code_inline"):
            parts.append(re.sub(rf"\s*{_DROPPED}", "", tok.content))
        elif tok.type in ("softbreak", "hardbreak"):
            parts.append(" ")
        elif tok.type == "image":
            parts.append(inline_text(tok.children) or tok.content)
        elif tok.type == "html_inline" and re.match(r"<br\s*/?>", tok.content, re.IGNORECASE):
            parts.append(" ")
        # link_open/close, em/strong/s markers and other inline HTML carry no words of their own
    return collapse("".join(parts))


class _Reader:
    def __init__(self, tokens: list[Token]) -> None:
        self.tokens = tokens
        self.blocks: list[Block] = []
        self.depth = -1  # list nesting: 0 for a top-level list's items
        self.item_prefix: list[str] = []  # the marker the next paragraph of each open list item takes

    def paragraph_end(self) -> None:
        if self.blocks and self.blocks[-1] != BLANK and self.depth < 0:
            self.blocks.append(BLANK)

    def line(self, text: str) -> None:
        if not text:
            return
        if self.depth >= 0:
            indent = "  " * self.depth
            prefix = self.item_prefix[-1] if self.item_prefix else ""
            if self.item_prefix:
                # Only an item's first paragraph carries the bullet; the rest are indented under it.
                self.item_prefix[-1] = " " * len(prefix)
            text = indent + prefix + text
        self.blocks.append(Block(text))

    def read(self) -> list[Block]:
        i = 0
        ordinals: list[int | None] = []
        while i < len(self.tokens):
            tok = self.tokens[i]
            kind = tok.type
            if kind == "front_matter":
                match = _TITLE.search(tok.content.replace(_DROPPED, ""))
                if match and match.group(2).strip():
                    self.blocks += [Block(collapse(match.group(2)), 1), BLANK]
            elif kind == "heading_open":
                text = inline_text(self.tokens[i + 1].children)
                if text:
                    self.paragraph_end()
                    self.blocks += [Block(text, _HEADING_LEVEL[tok.tag]), BLANK]
                i += 2
            elif kind == "inline":
                self.line(inline_text(tok.children))
            elif kind == "paragraph_close":
                self.paragraph_end()
            elif kind in ("bullet_list_open", "ordered_list_open"):
                if self.depth < 0:
                    self.paragraph_end()
                self.depth += 1
                start = tok.attrGet("start")
                ordinals.append(None if kind == "bullet_list_open" else int(start) if start is not None else 1)
            elif kind in ("bullet_list_close", "ordered_list_close"):
                self.depth -= 1
                ordinals.pop()
                self.paragraph_end()
            elif kind == "list_item_open":
                n = ordinals[-1]
                self.item_prefix.append(bullet() if n is None else f"{n}. ")
                if n is not None:
                    ordinals[-1] = n + 1
            elif kind == "list_item_close":
                self.item_prefix.pop()
            elif kind in ("fence", "code_block"):
                self.code(tok.content)
            elif kind == "html_block":
                self.html(tok.content)
            elif kind == "table_open":
                i = self.table(i)
            i += 1
        while self.blocks and self.blocks[-1] == BLANK:
            self.blocks.pop()
        return self.blocks

    def html(self, content: str) -> None:
        """Raw HTML as its text: a table's rows as sentences, a list's items as lines, as the HTML reader
        reads a page; inside a list item, its text as one line."""
        blocks = [b for b in read_html_fragment(content.replace(_DROPPED, "")) if b.text or b == BLANK]
        if self.depth >= 0:
            self.line(collapse(" ".join(b.text for b in blocks if not b.level)))
            return
        self.paragraph_end()
        self.blocks += blocks
        self.paragraph_end()

    def code(self, content: str) -> None:
        lines = [ln.rstrip() for ln in content.splitlines() if ln.strip()]
        if not lines:
            return
        was_list = self.depth >= 0
        if was_list:
            self.blocks.append(BLANK)
        else:
            self.paragraph_end()
        self.blocks += [Block("\n".join(CODE_INDENT + ln for ln in lines)), BLANK]

    def table(self, i: int) -> int:
        """The table starting at token i, as sentences; returns the index of its table_close."""
        header: list[str] = []
        rows: list[list[str]] = []
        row: list[str] = []
        in_head = False
        while self.tokens[i].type != "table_close":
            tok = self.tokens[i]
            if tok.type == "thead_open":
                in_head = True
            elif tok.type == "thead_close":
                in_head = False
            elif tok.type == "tr_open":
                row = []
            elif tok.type == "inline":
                row.append(inline_text(tok.children))
            elif tok.type == "tr_close":
                if in_head:
                    header = row
                else:
                    rows.append(row)
            i += 1
        self.paragraph_end()
        for sentence in table_sentences(header, rows):
            self.blocks.append(Block(sentence))
        self.paragraph_end()
        return i


def read_markdown(text: str) -> list[Block]:
    return _Reader(_PARSER.parse(drop_template_tags(text))).read()
