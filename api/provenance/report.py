"""What every report the offline tools write shares (`provenance evals`, `evals/`, `bench/`, `train/`): a
Markdown table, a cell of free text, a percentage, a path as a committed report shows it, the command
line's start-up (settings and logging), and a progress bar.

Written once, so two reports can't disagree on how a rate is rounded or a `|` in a question is escaped.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from provenance.settings import Settings

# A column's alignment in a table's rule line: left (text) or right (figures).
_RULE = {"l": "---", "r": "---:"}


def pct(x: float | None) -> str:
    """A rate as a report shows it: one decimal, or "n/a" when nothing was there to count."""
    return "n/a" if x is None else f"{100 * x:.1f}%"


def pct_of(num: int, den: int) -> str:
    """`num` of `den` as a percentage; "n/a" of none."""
    return "n/a" if den == 0 else f"{100 * num / den:.1f}%"


def cell(text: str | None) -> str:
    """Free text (a question, an answer, a reason) as one table cell: a `|` would end the cell, a newline the row."""
    return (text or "").replace("|", "\\|").replace("\n", " ")


def row(cells: Iterable[object]) -> str:
    """One table row. Cells are written as given (format figures before; free text through `cell`)."""
    return "| " + " | ".join(str(c) for c in cells) + " |"


def table(head: Sequence[str], align: str, rows: Iterable[Iterable[object]] = ()) -> list[str]:
    """A Markdown table's lines: the head, its rule (`align`, one letter a column: "l" left, "r" right) and
    the rows."""
    if len(align) != len(head):
        raise ValueError(f"{len(head)} columns but {len(align)} alignments ({align!r})")
    return [row(head), "|" + "|".join(_RULE[a] for a in align) + "|", *(row(r) for r in rows)]


def shown(path: Path) -> str:
    """A path as a report shows it: relative to the working directory, so no machine's layout is committed."""
    return os.path.relpath(path.resolve(), Path.cwd())


def cli_settings(*, log_level: str | None = None) -> Settings | None:
    """A command's start-up: the settings from the environment, and logging at their level (or `log_level`).
    None, with the reason on stderr, when the settings are wrong: the command then exits 2."""
    from provenance.errors import SettingsError
    from provenance.logs import configure_logging
    from provenance.settings import load_settings

    try:
        settings = load_settings()
    except SettingsError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        return None
    configure_logging(log_level or settings.server.log_level)
    return settings


class ProgressBar:
    """A dependency-free progress bar, drawn only when the stream is a terminal."""

    def __init__(self, total: int, label: str, stream: TextIO | None = None) -> None:
        self.total = max(total, 0)
        self.label = label
        self.stream = stream or sys.stdout
        self.enabled = self.stream.isatty() and self.total > 0
        self.done = 0
        self._started = time.monotonic()

    def advance(self, n: int = 1) -> None:
        self.done = min(self.total, self.done + n)
        if not self.enabled:
            return
        width = 30
        filled = int(width * self.done / self.total)
        elapsed = time.monotonic() - self._started
        rate = self.done / elapsed if elapsed > 0 else 0.0
        eta = (self.total - self.done) / rate if rate > 0 else 0.0
        bar = "█" * filled + "░" * (width - filled)
        self.stream.write(f"\r{self.label} {bar} {self.done}/{self.total} · {rate:.1f}/s · eta {eta:.0f}s ")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\n")
            self.stream.flush()
