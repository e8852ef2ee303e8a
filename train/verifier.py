"""Train the local verifier: MiniLM-L6 cross-encoder, one logit: does this evidence support this answer to
this question?

Input pair: (question, "answer [SEP] evidence"). The answer is what a claim asserts (a short span, or a
whole sentence); the evidence is the passage text it is checked against.

    .venv-train/bin/python -m train.verifier --out .train/verifier

Examples (SQuAD by article split, plus HaluEval QA):
- supported: the reference answer with its sentence; the whole answer sentence as the claim;
  HaluEval's right answer with its knowledge.
- not supported: another question's answer in the same sentence (wrong type); another sentence of the
  paragraph; for an unanswerable question, the sentence most like it and a span in that sentence (the
  look-alike); HaluEval's hallucinated answer with its knowledge.

Stage 2 (`--stage2-from`) adds easy negatives and changed claims; stage 3 (`--candidates`, from stage 2's
weights) adds the reader's own answers on the training articles (train/candidates.py), labelled right or
not: the pairs the verifier is asked about in the pipeline.
"""

from __future__ import annotations

import argparse
import json
import random
import re
import time
from pathlib import Path
from typing import Any

from train import common

MAX_LEN = 128
BATCH = 32


def _sentence_of(sentences: list[str], context: str, span: tuple[int, int]) -> str | None:
    pos = 0
    for s in sentences:
        i = context.find(s, pos)
        if i < 0:
            continue
        pos = i + len(s)
        if i <= span[0] and span[1] <= i + len(s):
            return s
    return None


def examples(
    rows: list[dict[str, Any]], halueval: list[dict[str, Any]], rng: random.Random
) -> list[tuple[str, str, int]]:
    text = common.text_module()
    out: list[tuple[str, str, int]] = []
    by_context: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_context.setdefault(r["context"], []).append(r)
    for context, qs in by_context.items():
        sentences = text.split_sentences(context)
        spans = {r["id"]: common.answer_span(r) for r in qs}
        answers_in: dict[str, list[str]] = {}
        for r in qs:
            sp = spans[r["id"]]
            if sp is None:
                continue
            s = _sentence_of(sentences, context, sp)
            if s:
                answers_in.setdefault(s, []).append(context[sp[0] : sp[1]])
        for r in qs:
            q = r["question"]
            sp = spans[r["id"]]
            qterms = text.content_terms(q)
            if sp is not None:
                gold = _sentence_of(sentences, context, sp)
                if gold is None:
                    continue
                answer = context[sp[0] : sp[1]]
                out.append((q, f"{answer} [SEP] {gold}", 1))
                if rng.random() < 0.5:
                    out.append((q, f"{gold} [SEP] {gold}", 1))
                wrong = [a for a in answers_in.get(gold, []) if a != answer and answer not in a and a not in answer]
                if wrong:
                    out.append((q, f"{rng.choice(wrong)} [SEP] {gold}", 0))
                others = [s for s in sentences if s != gold]
                if others and rng.random() < 0.6:
                    other = max(others, key=lambda s: (text.overlap(qterms, text.content_terms(s)), rng.random()))
                    spans_there = answers_in.get(other)
                    claim = rng.choice(spans_there) if spans_there and rng.random() < 0.5 else other
                    out.append((q, f"{claim} [SEP] {other}", 0))
            else:
                if not sentences:
                    continue
                near = max(sentences, key=lambda s: (text.overlap(qterms, text.content_terms(s)), rng.random()))
                out.append((q, f"{near} [SEP] {near}", 0))
                if answers_in.get(near):
                    out.append((q, f"{rng.choice(answers_in[near])} [SEP] {near}", 0))
    for h in halueval:
        out.append((h["question"], f"{h['right_answer']} [SEP] {h['knowledge']}", 1))
        out.append((h["question"], f"{h['hallucinated_answer']} [SEP] {h['knowledge']}", 0))
    return out


_NUMBER = re.compile(r"\d+(?:[.,]\d+)?")


def _other_number(token: str, rng: random.Random) -> str:
    digits = token.replace(",", "")
    try:
        value = float(digits)
    except ValueError:
        return token
    new = value + rng.choice([-2, -1, 1, 2, 5, 10]) * max(1.0, round(abs(value) * 0.1))
    return str(int(new)) if "." not in digits else f"{new:.1f}"


def stage2_examples(
    rows: list[dict[str, Any]], halueval: list[dict[str, Any]], rng: random.Random
) -> list[tuple[str, str, int]]:
    """What the first stage's data lacks: easy negatives (a sentence from another article), claims that
    change the passage (a number changed, the answer swapped for another question's), on top of a sample
    of the first stage's own kinds, so nothing learnt there is forgotten."""
    text = common.text_module()
    out = examples(rows, halueval, rng)
    by_title: dict[str, list[str]] = {}
    for r in rows:
        by_title.setdefault(r["title"], []).extend(text.split_sentences(r["context"]))
    titles = sorted(by_title)
    for r in rows:
        q = r["question"]
        other = rng.choice([t for t in titles if t != r["title"]] or titles)
        unrelated = rng.choice(by_title[other])
        if rng.random() < 0.5:
            out.append((q, f"{unrelated} [SEP] {unrelated}", 0))
        span = common.answer_span(r)
        if span is None:
            continue
        sentence = next((s for s in text.split_sentences(r["context"]) if r["context"][span[0] : span[1]] in s), None)
        if sentence is None:
            continue
        answer = r["context"][span[0] : span[1]]
        numbers = _NUMBER.findall(sentence)
        if numbers and rng.random() < 0.7:
            target = rng.choice(numbers)
            changed = sentence.replace(target, _other_number(target, rng), 1)
            if changed != sentence:
                out.append((q, f"{changed} [SEP] {sentence}", 0))
        if rng.random() < 0.5:
            wrong = rng.choice(by_title[r["title"]])
            words = [w for w in wrong.split() if w[:1].isupper() and w.lower() not in answer.lower()]
            if words:
                swapped = sentence.replace(answer, rng.choice(words).strip(",.;:"), 1)
                if swapped != sentence:
                    out.append((q, f"{swapped} [SEP] {sentence}", 0))
    return out


# The pipeline checks the sentence of the reader's best span; its second best is kept as the nearest
# alternative, and lower ones (mostly other passages' easy misses) are left out.
MAX_READER_RANK = 2


def reader_answers(path: Path, val_titles: set[str], rng: random.Random) -> list[tuple[str, str, int]]:
    """The reader's answers as the pipeline checks them: a quoted sentence is its own evidence."""
    out = []
    for record in common.read_jsonl(path):
        if record["title"] in val_titles:
            raise SystemExit(f"{path}: a validation article ({record['title']}) among the candidates")
        if record["rank"] > MAX_READER_RANK:
            continue
        sentence = record["sentence"]
        out.append((record["question"], f"{sentence} [SEP] {sentence}", int(record["label"])))
        if rng.random() < TYPO_SHARE:
            out.append((misspelt(record["question"], rng), f"{sentence} [SEP] {sentence}", int(record["label"])))
    return out


# People type questions with slips ("how mcuh is a day pas?"); a share of the pairs is repeated with one.
TYPO_SHARE = 0.25


def misspelt(question: str, rng: random.Random) -> str:
    """The question with one or two words mistyped (letters swapped, dropped or doubled), sometimes in
    lower case without its question mark."""
    words = question.split()
    long_ones = [i for i, w in enumerate(words) if len(w) >= 4 and w.isalpha()]
    for i in rng.sample(long_ones, min(len(long_ones), rng.choice([1, 2]))):
        w, k = words[i], rng.randrange(1, len(words[i]) - 1)
        kind = rng.choice(["swap", "drop", "double"])
        if kind == "swap":
            w = w[:k] + w[k + 1] + w[k] + w[k + 2 :]
        elif kind == "drop":
            w = w[:k] + w[k + 1 :]
        else:
            w = w[:k] + w[k] + w[k:]
        words[i] = w
    out = " ".join(words)
    return out.lower().rstrip("?") if rng.random() < 0.3 else out


def evaluate(model: Any, tok: Any, pairs: list[tuple[str, str, int]]) -> list[float]:
    import torch

    model.eval()
    scores: list[float] = []
    with torch.no_grad():
        for b in range(0, len(pairs), 64):
            chunk = pairs[b : b + 64]
            enc = tok(
                [p[0] for p in chunk],
                [p[1] for p in chunk],
                truncation=True,
                max_length=MAX_LEN,
                padding=True,
                return_tensors="pt",
            )
            scores.extend(torch.sigmoid(model(**enc).logits[:, 0]).tolist())
    model.train()
    return scores


def auc(scores: list[float], labels: list[int]) -> float:
    pos = [s for s, y in zip(scores, labels, strict=True) if y]
    neg = [s for s, y in zip(scores, labels, strict=True) if not y]
    pos.sort()
    neg.sort()
    # Mann-Whitney U by merging sorted lists
    import bisect

    wins = sum(
        bisect.bisect_left(neg, p) + 0.5 * (bisect.bisect_right(neg, p) - bisect.bisect_left(neg, p)) for p in pos
    )
    return wins / (len(pos) * len(neg))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--training-dir", type=Path, default=common.ROOT.parent / "shared" / "training")
    ap.add_argument("--out", type=Path, default=common.ROOT / ".train" / "verifier")
    ap.add_argument("--halueval-rows", type=int, default=4000)
    ap.add_argument("--max-pairs", type=int, default=26000)
    ap.add_argument("--epochs", type=int, default=1)
    ap.add_argument("--lr", type=float, default=5e-5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ckpt-every", type=int, default=100)
    ap.add_argument("--done-flag", type=Path, default=None)
    ap.add_argument(
        "--stage2-from", type=Path, default=None, help="continue from this checkpoint on the second stage's data"
    )
    ap.add_argument(
        "--candidates",
        type=Path,
        default=None,
        help="the reader's labelled answers on the training articles (train/candidates.py), trained on with "
        "as many of the second stage's pairs",
    )
    ap.add_argument("--onnx", type=Path, default=common.MODELS / "verifier-int8.onnx")
    args = ap.parse_args()

    import torch
    from transformers import AutoTokenizer, BertForSequenceClassification

    torch.manual_seed(common.SEED)
    torch.set_num_threads(args.threads)
    args.out.mkdir(parents=True, exist_ok=True)
    rng = random.Random(common.SEED)
    base = common.base_model_dir()
    tok = AutoTokenizer.from_pretrained(base)
    train_rows, val_rows, val_titles = common.squad_rows(args.training_dir)
    halu = common.read_jsonl(common.halueval_path())
    random.Random(common.SEED).shuffle(halu)
    n_val_h = 500
    halu_val, halu_train = halu[:n_val_h], halu[n_val_h : n_val_h + args.halueval_rows]
    make = stage2_examples if args.stage2_from else examples
    train = make(train_rows, halu_train, rng)
    rng.shuffle(train)
    train = train[: args.max_pairs]
    found: list[tuple[str, str, int]] = []
    if args.candidates:
        # The third stage: what the verifier meets in the pipeline (the reader's right answers, its
        # look-alikes for unanswerable questions, its wrong sentences), kept beside a sample of the earlier
        # kinds so those aren't forgotten.
        found = reader_answers(args.candidates, {r["title"] for r in val_rows}, rng)
        train = train[: len(found)] + found
        rng.shuffle(train)
    val = make(val_rows, halu_val, random.Random(common.SEED + 1))
    common.log(f"verifier: {len(train)} train pairs ({sum(y for *_, y in train)} supported), {len(val)} val pairs")

    enc = tok([p[0] for p in train], [p[1] for p in train], truncation=True, max_length=MAX_LEN)
    lengths = [len(x) for x in enc["input_ids"]]
    schedule = [b for _ in range(args.epochs) for b in common.length_grouped(lengths, BATCH, rng)]
    total = len(schedule)
    model = BertForSequenceClassification.from_pretrained(base, num_labels=1)
    if args.stage2_from:
        model.load_state_dict(torch.load(args.stage2_from, weights_only=False)["model"])
    steps = common.Steps("verifier", model, args.lr, total, args.out, BATCH, args.ckpt_every)
    lossf = torch.nn.BCEWithLogitsLoss()
    while not steps.done:
        idx = schedule[steps.step]
        ids = torch.tensor(common.pad([enc["input_ids"][i] for i in idx]))
        tt = torch.tensor(common.pad([enc["token_type_ids"][i] for i in idx]))
        y = torch.tensor([float(train[i][2]) for i in idx])
        logits = model(input_ids=ids, attention_mask=(ids != 0).long(), token_type_ids=tt).logits[:, 0]
        loss = lossf(logits, y)
        steps.update(loss, len(idx))
    if args.done_flag:
        args.done_flag.touch()
    scores = evaluate(model, tok, val)
    labels = [y for *_, y in val]
    n_h = 2 * len(halu_val)
    summary = {
        "val_auc": auc(scores, labels),
        "val_auc_squad": auc(scores[:-n_h], labels[:-n_h]),
        "val_auc_halueval": auc(scores[-n_h:], labels[-n_h:]),
        "train_pairs": len(train),
        "val_pairs": len(val),
        "val_titles": val_titles,
        "halueval_train_rows": len(halu_train),
        "reader_answer_pairs": len(found),
        "reader_answer_supported": sum(y for *_, y in found),
        "steps": total,
        "batch": BATCH,
        "lr": args.lr,
        "epochs": args.epochs,
        "max_len": MAX_LEN,
        "seed": common.SEED,
        "train_seconds": round(time.time() - steps.started),
    }
    (args.out / "val_scores.json").write_text(json.dumps({"scores": scores, "labels": labels}))
    (args.out / "summary.json").write_text(json.dumps(summary, indent=2))
    common.log(f"verifier: {summary}")
    model.save_pretrained(args.out / "final")
    tok.save_pretrained(args.out / "final")
    common.export_int8(model, args.onnx, ["logits"])
    common.log(f"verifier: exported {args.onnx}")


if __name__ == "__main__":
    main()
