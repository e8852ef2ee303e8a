"""Export a training checkpoint to int8 ONNX (the training scripts do this when they finish; this is for
a run stopped early, or to try a checkpoint).

    .venv-train/bin/python -m train.export reader .train/reader/step-500.pt api/provenance/data/reader-int8.onnx
"""

from __future__ import annotations

import sys
from pathlib import Path

from train import common


def main() -> None:
    kind, ckpt, out = sys.argv[1], Path(sys.argv[2]), Path(sys.argv[3])
    import torch
    from transformers import BertForQuestionAnswering, BertForSequenceClassification

    base = common.base_model_dir()
    if kind == "reader":
        model = BertForQuestionAnswering.from_pretrained(base)
        names = ["start_logits", "end_logits"]
    else:
        model = BertForSequenceClassification.from_pretrained(base, num_labels=1)
        names = ["logits"]
    model.load_state_dict(torch.load(ckpt, weights_only=False)["model"])
    common.export_int8(model, out, names)
    common.log(f"exported {ckpt} -> {out} ({out.stat().st_size / 1e6:.1f} MB)")


if __name__ == "__main__":
    main()
