"""What the pipeline tells whoever watches it: the port the metrics (provenance.metrics) plug into, kept apart
from them so that the pipeline, the evals and the benchmarks of the pipeline alone never need them."""

from __future__ import annotations

from typing import Protocol

from provenance.errors import ModelError
from provenance.wire import AskResponse


class AskObserver(Protocol):
    """Told what the pipeline did (provenance.metrics.PrometheusObserver counts it): every answer
    `Pipeline.ask` returns (cached, blocked at the door, or the whole run; streamed or not), every model error
    it turned into `model_error`, and every change in its admission queue."""

    def outcome(self, response: AskResponse) -> None: ...

    def model_error(self, error: ModelError) -> None: ...

    def admission(self, running: int, waiting: int) -> None: ...


class NoObserver:
    """Watches nothing: in-process runs (evals, benchmarks of the pipeline alone) and METRICS_ENABLED=false."""

    def outcome(self, response: AskResponse) -> None:
        return None

    def model_error(self, error: ModelError) -> None:
        return None

    def admission(self, running: int, waiting: int) -> None:
        return None
