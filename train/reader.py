"""Train the local reader: MiniLM-L6 with a span head, SQuAD 2.0 style (no answer = the [CLS] position).

    .venv-train/bin/python -m train.reader --out .train/reader [--epochs 1]

Resumes from the newest checkpoint in --out. Writes val predictions (for threshold choice) and the int8
ONNX model when done.
"""

from __future__ import annotations

import argparse
import json
import math
import random
import time
from pathlib import Path
from typing import Any

from train import common

MAX_LEN = 256
STRIDE = 96
BATCH = 16


def features(rows: list[dict[str, Any]], tokenizer: Any) -> list[dict[str, Any]]:
    """One feature per window of a paragraph (long paragraphs overlap by STRIDE tokens)."""
    enc = tokenizer(
        [r["question"] for r in rows],
        [r["context"] for r in rows],
        truncation="only_second",
        max_length=MAX_LEN,
        stride=STRIDE,
        return_overflowing_tokens=True,
        return_offsets_mapping=True,
    )
    out = []
    for i, ids in enumerate(enc["input_ids"]):
        r = rows[enc["overflow_to_sample_mapping"][i]]
        seq = enc.sequence_ids(i)
        offsets = enc["offset_mapping"][i]
        span = common.answer_span(r)
        start = end = 0
        if span is not None:
            ctx = [k for k, s in enumerate(seq) if s == 1]
            if offsets[ctx[0]][0] <= span[0] and offsets[ctx[-1]][1] >= span[1]:
                start = next(k for k in ctx if offsets[k][1] > span[0])
                end = next(k for k in reversed(ctx) if offsets[k][0] < span[1])
        out.append(
            {
                "id": r["id"],
                "input_ids": ids,
                "token_type_ids": enc["token_type_ids"][i],
                "start": start,
                "end": end,
                "offsets": [o if s == 1 else None for o, s in zip(offsets, seq, strict=True)],
            }
        )
    return out


def evaluate(model: Any, feats: list[dict[str, Any]], rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Per question: the best span over its windows (start <= end, at most 30 tokens) and the null score
    (CLS start + CLS end, the minimum over windows, as in the SQuAD 2.0 reference)."""
    import torch

    model.eval()
    best: dict[str, tuple[float, str]] = {}
    null: dict[str, float] = {}
    by_id = {r["id"]: r for r in rows}
    with torch.no_grad():
        for b in range(0, len(feats), 64):
            chunk = feats[b : b + 64]
            ids = torch.tensor(common.pad([f["input_ids"] for f in chunk]))
            tt = torch.tensor(common.pad([f["token_type_ids"] for f in chunk]))
            out = model(input_ids=ids, attention_mask=(ids != 0).long(), token_type_ids=tt)
            for j, f in enumerate(chunk):
                s = out.start_logits[j][: len(f["input_ids"])]
                e = out.end_logits[j][: len(f["input_ids"])]
                n = float(s[0] + e[0])
                null[f["id"]] = min(null.get(f["id"], n), n)
                ctx = [k for k, o in enumerate(f["offsets"]) if o is not None]
                top_s = sorted(ctx, key=lambda k: -float(s[k]))[:20]
                top_e = sorted(ctx, key=lambda k: -float(e[k]))[:20]
                for a in top_s:
                    for z in top_e:
                        if z < a or z - a > 30:
                            continue
                        score = float(s[a] + e[z])
                        if score > best.get(f["id"], (-1e9, ""))[0]:
                            ctx_text = by_id[f["id"]]["context"]
                            best[f["id"]] = (score, ctx_text[f["offsets"][a][0] : f["offsets"][z][1]])
    preds = []
    for r in rows:
        score, text = best.get(r["id"], (-1e9, ""))
        preds.append(
            {
                "id": r["id"],
                "title": r["title"],
                "answerable": not r["is_impossible"],
                "margin": score - null[r["id"]],
                "text": text,
                "correct": bool(text) and any(_norm(text) == _norm(a) for a in r["answers"]),
                "f1": max((_f1(text, a) for a in r["answers"]), default=0.0),
            }
        )
    model.train()
    return {"preds": preds, **metrics(preds)}


def _norm(s: str) -> str:
    import re
    import string

    s = "".join(ch for ch in s.lower() if ch not in set(string.punctuation))
    s = re.sub(r"\b(a|an|the)\b", " ", s)
    return " ".join(s.split())


def _f1(pred: str, gold: str) -> float:
    p, g = _norm(pred).split(), _norm(gold).split()
    common_n = sum(min(p.count(w), g.count(w)) for w in set(p))
    if not p or not g or common_n == 0:
        return 0.0
    prec, rec = common_n / len(p), common_n / len(g)
    return 2 * prec * rec / (prec + rec)


def metrics(preds: list[dict[str, Any]]) -> dict[str, float]:
    pos = [p["margin"] for p in preds if p["answerable"]]
    neg = [p["margin"] for p in preds if not p["answerable"]]
    wins = sum((a > b) + 0.5 * (a == b) for a in pos for b in neg)
    auc = wins / (len(pos) * len(neg)) if pos and neg else float("nan")
    ans = [p for p in preds if p["answerable"]]
    return {
        "auc_answerable": auc,
        "span_exact": sum(p["correct"] for p in ans) / max(1, len(ans)),
        "span_f1": sum(p["f1"] for p in ans) / max(1, len(ans)),
    }


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--training-dir", type=Path, default=common.ROOT.parent / "shared" / "training")
    ap.add_argument("--out", type=Path, default=common.ROOT / ".train" / "reader")
    ap.add_argument("--epochs", type=float, default=1.0)
    ap.add_argument("--lr", type=float, default=1e-4)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--grow-threads-when", type=Path, default=None, help="use 2 threads once this file exists")
    ap.add_argument("--ckpt-every", type=int, default=100)
    ap.add_argument("--onnx", type=Path, default=common.MODELS / "reader-int8.onnx")
    args = ap.parse_args()

    import torch
    from transformers import AutoTokenizer, BertForQuestionAnswering

    torch.manual_seed(common.SEED)
    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    base = common.base_model_dir()
    tok = AutoTokenizer.from_pretrained(base)
    train_rows, val_rows, val_titles = common.squad_rows(args.training_dir)
    common.log(f"reader: {len(train_rows)} train questions, {len(val_rows)} val ({', '.join(val_titles)})")
    feats = features(train_rows, tok)
    val_feats = features(val_rows, tok)
    common.log(f"reader: {len(feats)} train windows, {len(val_feats)} val windows")

    rng = random.Random(common.SEED)
    lengths = [len(f["input_ids"]) for f in feats]
    epochs = math.ceil(args.epochs)
    schedule = [b for _ in range(epochs) for b in common.length_grouped(lengths, BATCH, rng)]
    schedule = schedule[: int(len(schedule) * args.epochs / epochs)]
    total = len(schedule)

    model = BertForQuestionAnswering.from_pretrained(base)
    steps = common.Steps("reader", model, args.lr, total, args.out, BATCH, args.ckpt_every)
    while not steps.done:
        if args.grow_threads_when and args.grow_threads_when.exists() and torch.get_num_threads() < 2:
            torch.set_num_threads(2)
            common.log("reader: now 2 threads")
        batch = [feats[i] for i in schedule[steps.step]]
        ids = torch.tensor(common.pad([f["input_ids"] for f in batch]))
        tt = torch.tensor(common.pad([f["token_type_ids"] for f in batch]))
        out = model(
            input_ids=ids,
            attention_mask=(ids != 0).long(),
            token_type_ids=tt,
            start_positions=torch.tensor([f["start"] for f in batch]),
            end_positions=torch.tensor([f["end"] for f in batch]),
        )
        steps.update(out.loss, len(batch))

    common.log("reader: evaluating on the validation articles")
    result = evaluate(model, val_feats, val_rows)
    (args.out / "val_preds.json").write_text(json.dumps(result["preds"]))
    summary = {k: v for k, v in result.items() if k != "preds"}
    summary.update(
        train_questions=len(train_rows),
        train_windows=len(feats),
        val_questions=len(val_rows),
        val_titles=val_titles,
        steps=total,
        batch=BATCH,
        lr=args.lr,
        epochs=args.epochs,
        max_len=MAX_LEN,
        stride=STRIDE,
        seed=common.SEED,
        train_seconds=round(time.time() - steps.started),
    )
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2))
    common.log(f"reader: {summary}")
    model.save_pretrained(args.out / "final")
    tok.save_pretrained(args.out / "final")
    common.export_int8(model, args.onnx, ["start_logits", "end_logits"])
    common.log(f"reader: exported {args.onnx}")


if __name__ == "__main__":
    main()
