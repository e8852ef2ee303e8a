"""A stopwatch for the records every stage and guard leaves: how long it took, in milliseconds."""

from __future__ import annotations

import time


class Timer:
    """Milliseconds since construction, rounded for the wire."""

    def __init__(self) -> None:
        self._start = time.perf_counter()

    @property
    def ms(self) -> float:
        return round((time.perf_counter() - self._start) * 1000, 2)
