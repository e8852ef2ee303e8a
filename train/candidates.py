"""The reader's own answers on the training articles, labelled: what the verifier meets in the pipeline.

    .venv/bin/python -m train.candidates --out .train/candidates.jsonl [--questions 4000]

Per training question, as `train/calibrate.py` does on the validation articles: the article's paragraphs
ranked by the service's embedder, the top K kept, and the reader run over them through the runtime code
(the int8 ONNX file). The sentences around its best spans (up to SPANS distinct ones, whatever the
no-answer score says) are written with a label: right when the question is answerable and the sentence
holds a reference answer. For an unanswerable question every sentence the reader offers is the look-alike
the verifier has to refuse; for an answerable one, a sentence without the answer is the reader's mistake.

Only training articles are read: the validation articles stay for choosing the operating point.
"""

from __future__ import annotations

import argparse
import json
import random
import time
from pathlib import Path
from typing import Any

from train import common
from train.calibrate import Retrieval, holds_answer

SPANS = 3


def candidates(rows: list[dict[str, Any]], out: Path, reader_path: Path | None) -> None:
    from provenance import text as T
    from provenance.inference.cross_encoders import Reader, get_reader

    reader = Reader(reader_path) if reader_path else get_reader()
    retrieve = Retrieval(rows)
    t0 = time.time()
    with out.open("w", encoding="utf-8") as fh:
        for n, r in enumerate(rows, 1):
            passages = retrieve(r)
            seen: set[str] = set()
            for span in reader.read(r["question"], passages):
                sentence = T.sentences_around(passages[span.passage_index], span.start, span.end) or span.text
                if sentence in seen:
                    continue
                seen.add(sentence)
                right = not r["is_impossible"] and holds_answer(sentence, r["answers"])
                record = {
                    "id": r["id"],
                    "title": r["title"],
                    "question": r["question"],
                    "sentence": sentence,
                    "label": int(right),
                    "answerable": not r["is_impossible"],
                    "margin": round(span.margin, 3),
                    "rank": len(seen),
                }
                fh.write(json.dumps(record) + "\n")
                if len(seen) >= SPANS:
                    break
            if n % 100 == 0:
                fh.flush()
                common.log(f"candidates: {n}/{len(rows)} questions, {n / (time.time() - t0):.1f}/s")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--training-dir", type=Path, default=common.ROOT.parent / "shared" / "training")
    ap.add_argument("--out", type=Path, default=common.ROOT / ".train" / "candidates.jsonl")
    ap.add_argument("--questions", type=int, default=4000, help="a random sample of the training questions")
    ap.add_argument("--reader", type=Path, default=None, help="a reader ONNX file other than api/provenance/data's")
    args = ap.parse_args()
    train_rows, _, val_titles = common.squad_rows(args.training_dir)
    assert not {r["title"] for r in train_rows} & set(val_titles)
    rows = random.Random(common.SEED).sample(train_rows, min(args.questions, len(train_rows)))
    args.out.parent.mkdir(parents=True, exist_ok=True)
    candidates(rows, args.out, args.reader)
    common.log(f"candidates: wrote {args.out}")


if __name__ == "__main__":
    main()
