"""A judge model's calibration: the map from its raw P(Yes) on support to the gate's scale, fitted per model on
`evals/support-pairs.jsonl` (`evals/judge_pairs.py --fit`) and kept in `data/judge_calibration.json`. A
model without one runs uncalibrated (its raw P(Yes) is the score), and `/healthz` and the page say so."""

from __future__ import annotations

import math
from pathlib import Path

import msgspec

# provenance/data, beside the local verifier's coefficients (claims/judge/ is two levels below the package).
CALIBRATION_PATH = Path(__file__).resolve().parents[2] / "data" / "judge_calibration.json"
# P(Yes) is clipped away from 0 and 1 before its logit is taken: a judgment is never certain.
_EPS = 1e-4


class JudgeCalibration(msgspec.Struct, frozen=True, kw_only=True):
    """sigmoid(a * logit(p) + b): Platt scaling of the judge's P(Yes)."""

    model: str
    a: float
    b: float
    # What it was fitted on, and how well the raw P(Yes) separated the pairs there.
    fitted_on: str
    pairs: int
    auc: float
    # Relevance's own map, when one was fitted (`evals/judge_relevance.py`); else relevance is the raw P(Yes).
    relevance_a: float | None = None
    relevance_b: float | None = None
    relevance_fitted_on: str | None = None

    @property
    def version(self) -> str:
        return f"{self.a:.4f},{self.b:.4f},{self.relevance_a},{self.relevance_b}"

    def apply(self, p_yes: float) -> float:
        return _platt(p_yes, self.a, self.b)

    def apply_relevance(self, p_yes: float) -> float:
        if self.relevance_a is None or self.relevance_b is None:
            return p_yes
        return _platt(p_yes, self.relevance_a, self.relevance_b)


def _platt(p_yes: float, a: float, b: float) -> float:
    p = min(1 - _EPS, max(_EPS, p_yes))
    z = a * math.log(p / (1 - p)) + b
    return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, z))))


def load_calibrations(path: Path = CALIBRATION_PATH) -> dict[str, JudgeCalibration]:
    if not path.is_file():
        return {}
    return msgspec.json.decode(path.read_bytes(), type=dict[str, JudgeCalibration])


def calibration_for(model: str, path: Path = CALIBRATION_PATH) -> JudgeCalibration | None:
    """The calibration fitted for this model name (or for the file it names, as llama.cpp reports it)."""
    calibrations = load_calibrations(path)
    key = model.lower()
    return calibrations.get(key) or next((c for name, c in calibrations.items() if key.endswith(name)), None)


def save_calibration(calibration: JudgeCalibration, path: Path = CALIBRATION_PATH) -> None:
    calibrations = load_calibrations(path)
    calibrations[calibration.model.lower()] = calibration
    path.write_bytes(msgspec.json.format(msgspec.json.encode(dict(sorted(calibrations.items()))), indent=2) + b"\n")
