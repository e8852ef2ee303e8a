"""Markdown and plain text, line by line: ATX headings (`#` to `######`) outside fenced code are headings;
every other line is body text, kept as written."""

from __future__ import annotations

import re

from provenance.documents.blocks import Block

_HEADING = re.compile(r"^(#{1,6})\s+(.*?)\s*#*\s*$")
_FENCE = re.compile(r"^\s*(```|~~~)")


def read_markdown(text: str) -> list[Block]:
    blocks: list[Block] = []
    in_fence = False
    for line in text.splitlines():
        if _FENCE.match(line):
            in_fence = not in_fence
        match = None if in_fence else _HEADING.match(line)
        if match:
            blocks.append(Block(match.group(2).strip(), len(match.group(1))))
        else:
            blocks.append(Block(line))
    return blocks
