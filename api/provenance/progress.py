"""A dependency-free progress bar, drawn only when the stream is a terminal."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
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
