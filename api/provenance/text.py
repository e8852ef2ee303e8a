"""Small, dependency-free text analysis shared by the local generator, verifier and lexical check."""

from __future__ import annotations

import re
from functools import lru_cache
from pathlib import Path

_WORDS_DIR = Path(__file__).resolve().parent / "data" / "words"


def _word_list(name: str) -> list[str]:
    """data/words/<name>.txt: one word a line, in order; lines starting with # say what the list is for."""
    lines = (_WORDS_DIR / f"{name}.txt").read_text(encoding="utf-8").splitlines()
    return [word for line in lines if (word := line.strip()) and not word.startswith("#")]


# Read once, at import.
STOPWORDS = frozenset(_word_list("stopwords"))
# Words that ask rather than inform: they carry no content for coverage checks.
QUESTION_WORDS = frozenset(_word_list("question_words"))
# Everyday words that name no topic of their own ("what happens if...") and phrasal verbs' particles.
QUESTION_FILLER = frozenset(_word_list("question_filler"))
NEGATIONS = frozenset(_word_list("negations"))
MONTHS = _word_list("months")
_MONTHS = frozenset(MONTHS)
_WORD = re.compile(r"[a-z0-9]+(?:['’][a-z]+)?(?:[.,:][0-9]+)*")
_NUMBER = re.compile(r"(?<![\w.])[$£€]?\d+(?:[.,:]\d+)*(?:\s?%)?")
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_SENTENCE_END = re.compile(r"(?<=[.!?])[\"')\]]*\s+(?=[\"'(\[]?[A-Z0-9$£€])")
_NUMBER_WORDS = {
    "one": "1", "two": "2", "three": "3", "four": "4", "five": "5", "six": "6", "seven": "7", "eight": "8",
    "nine": "9", "ten": "10", "eleven": "11", "twelve": "12", "fifteen": "15", "twenty": "20", "thirty": "30",
    "forty": "40", "fifty": "50", "hundred": "100",
}  # fmt: skip


def words(text: str) -> list[str]:
    return _WORD.findall(text.lower().replace("’", "'"))


@lru_cache(maxsize=65536)
def stem(word: str) -> str:
    """A light suffix stripper: enough to match 'lockers'/'locker' and 'booking'/'book'."""
    w = word.lower().replace("'s", "")
    if len(w) <= 3 or w.isdigit():
        return w
    for suffix, keep in (
        ("ational", "ate"), ("ization", "ize"), ("iveness", "ive"), ("fulness", "ful"), ("ousness", "ous"),
        ("ies", "y"), ("ied", "y"), ("sses", "ss"), ("ings", ""), ("ing", ""), ("edly", ""), ("ed", ""),
        ("ly", ""), ("es", "e"), ("s", ""),
    ):  # fmt: skip
        if w.endswith(suffix) and len(w) - len(suffix) >= 3:
            w = w[: len(w) - len(suffix)] + keep
            break
    if w.endswith("e") and len(w) > 4:
        w = w[:-1]
    if len(w) > 4 and w[-1] == w[-2] and w[-1] not in "lsz":
        w = w[:-1]
    return w


def content_terms(text: str) -> set[str]:
    """Stems of the words that carry meaning (no stopwords, no question words)."""
    out = set()
    for w in words(text):
        if w in STOPWORDS or w in QUESTION_WORDS or (len(w) < 2 and not w.isdigit()):
            continue
        out.add(_NUMBER_WORDS.get(w, stem(w)))
    return out


def numbers(text: str) -> set[str]:
    """Numbers as written, normalised: '$14', '14', '9:30', '50%' (currency sign kept: $14 is not 14 days)."""
    found = set()
    for m in _NUMBER.findall(text):
        value = m.replace(" ", "").replace(",", "")
        if value.endswith(".00"):
            value = value[:-3]
        found.add(value)
    for w in words(text):
        if w in _NUMBER_WORDS:
            found.add(_NUMBER_WORDS[w])
    return found


def bare_numbers(text: str) -> set[str]:
    return {n.lstrip("$£€").rstrip("%") for n in numbers(text)}


def unsupported_numbers(claim: str, support: str) -> set[str]:
    """Numbers of the claim its support lacks. An amount keeps its currency ("$14" is not "14 days");
    a plain number may match an amount ("14" is in "$14")."""
    have, have_bare = numbers(support), bare_numbers(support)
    missing = set()
    for n in numbers(claim):
        if n[0] in "$£€" or n.endswith("%"):
            if n not in have:
                missing.add(n)
        elif n not in have_bare:
            missing.add(n)
    return missing


def emails(text: str) -> set[str]:
    return {e.lower().rstrip(".") for e in _EMAIL.findall(text)}


def months(text: str) -> set[str]:
    return {w[:3] for w in words(text) if w in _MONTHS and w != "may"} | (
        {"may"} if re.search(r"\bMay\b", text) else set()
    )


_YEAR_MENTION = re.compile(r"\b(1[0-9]{3}|20[0-9]{2})(?:['’]?s)?(?![\w'’])")
_CENTURY = re.compile(r"\b(\d{1,2})(?:st|nd|rd|th)[ -]centur(?:y|ies)\b", re.IGNORECASE)


def _year_span(mention: re.Match[str]) -> tuple[int, int]:
    """The years a mention covers: "2027" one, "1990s" a decade, "1100s" a century."""
    year = int(mention.group(1))
    if not re.search(r"s$", mention.group(0)):
        return year, year
    return (year, year + 99) if year % 100 == 0 else (year, year + 9)


def _covers_years(text: str, low: int, high: int) -> bool:
    if any(low <= int(m.group(1)) <= high for m in _YEAR_MENTION.finditer(text)):
        return True
    # "the 1100s" is "the 12th century"; a single year is within its century too, but a passage that names
    # only the century doesn't say which year, so only a century-wide question counts as covered.
    return high - low == 99 and any(int(c) == low // 100 + 1 for c in _CENTURY.findall(text))


def dates_not_covered(question: str, claim: str, support: str) -> list[str]:
    """The years and months a question pins its subject to that an answer's support never mentions: "the
    2028 AGM" is not answered by a passage about the 2027 one, nor "the open house in December" by a
    claim that names March, June and October. A month counts only when the claim names other months (a
    rule that holds all year answers "can I join in December?"); a year always counts."""
    missing = [m.group(0) for m in _YEAR_MENTION.finditer(question) if not _covers_years(support, *_year_span(m))]
    asked_months, claim_months = months(question), months(claim)
    if asked_months and claim_months and not asked_months & (claim_months | months(support)):
        missing.extend(sorted(asked_months))
    return missing


def entities(text: str) -> set[str]:
    """Capitalised words that are not sentence-initial: names of people, places, tiers, rooms."""
    found = set()
    for sentence in split_sentences(text):
        tokens = re.findall(r"[A-Za-z][\w'’-]*", sentence)
        for i, tok in enumerate(tokens):
            if i == 0 or not tok[0].isupper() or tok.lower() in STOPWORDS or tok.lower() in _MONTHS:
                continue
            found.add(stem(tok.lower()))
    return found


def has_negation(text: str) -> bool:
    return any(w in NEGATIONS or w.endswith("n't") for w in words(text))


def split_sentences(text: str) -> list[str]:
    """Sentences of a passage; each list item or line of a list counts as one."""
    out: list[str] = []
    for block in re.split(r"\n\s*\n", text):
        lines = [ln.strip() for ln in block.splitlines() if ln.strip()]
        is_list = all(re.match(r"^([-*+]|\d+[.)])\s+", ln) for ln in lines[1:]) and len(lines) > 1
        units = lines if is_list or any(re.match(r"^([-*+]|\d+[.)])\s+", ln) for ln in lines) else [" ".join(lines)]
        for unit in units:
            unit = re.sub(r"^([-*+]|\d+[.)])\s+", "", unit)
            out.extend(s.strip() for s in _SENTENCE_END.split(unit) if len(s.strip()) > 1)
    return out


def overlap(a: set[str], b: set[str]) -> float:
    """Share of `a` found in `b` (1.0 when `a` is empty: nothing to contradict)."""
    return 1.0 if not a else len(a & b) / len(a)


def normalise_question(text: str) -> str:
    return " ".join(words(text))


def _single_spaced(text: str) -> str:
    """Line breaks and runs of spaces as one space: how a quote is compared with its source."""
    return " ".join(text.split())


def quoted_in(claim: str, text: str) -> bool:
    """Whether `text` contains `claim` word for word (line breaks and runs of spaces aside)."""
    return _single_spaced(claim) in _single_spaced(text)


@lru_cache(maxsize=4096)
def _sentence_set(text: str) -> frozenset[str]:
    return frozenset(_single_spaced(s) for s in split_sentences(text))


def is_sentence_of(claim: str, text: str) -> bool:
    """Whether `claim` is one whole sentence of `text`, word for word. A mere substring is not enough:
    "the fee is $30" inside "If you join before May, the fee is $30" says something else."""
    return _single_spaced(claim) in _sentence_set(text)


def sentence_ranges(text: str) -> list[tuple[int, int, str]]:
    """Each sentence of `text` (as `split_sentences` gives them) with its [start, end) in `text`.

    Sentences lose list markers and line breaks, so they are located by their non-space characters, in
    order: a sentence that occurs twice maps to the occurrence after the one before it."""
    squeezed, where = [], []
    for i, ch in enumerate(text):
        if not ch.isspace():
            squeezed.append(ch)
            where.append(i)
    flat = "".join(squeezed)
    out: list[tuple[int, int, str]] = []
    pos = 0
    for sentence in split_sentences(text):
        needle = "".join(sentence.split())
        at = flat.find(needle, pos)
        if at < 0 or not needle:
            continue
        out.append((where[at], where[at + len(needle) - 1] + 1, sentence))
        pos = at + len(needle)
    return out


# The version of the sentence segmentation below (`split_sentences`, `sentence_ranges`): what keys the sentence
# spans and vectors stored at ingest (passage_sentences), so a change to how sentences are split is a recompute.
SEGMENTER_VERSION = "rules-1"


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """The [start, end) of each sentence unit of a passage, in code points: what ingest stores (with each
    one's vector) in passage_sentences. The sentence's text is `text[start:end]`."""
    return [(start, end) for start, end, _ in sentence_ranges(text)]


def sentences_around(text: str, start: int, end: int) -> str:
    """The sentence(s) of `text` holding characters [start, end), joined; empty when none does."""
    hit = [s for a, b, s in sentence_ranges(text) if a < end and b > start]
    return " ".join(hit)


_CLAUSE_SPLIT = re.compile(
    r"\?\s+|[.!]\s+(?=[A-Z])|;\s*|,?\s+(?:and|or|but|also)\s+(?=(?:can|could|is|are|do|does|did|how|what|when|where|"
    r"who|which|will|should|may|must|would|if|i|we)\b)",
    re.IGNORECASE,
)


_ASKS = re.compile(
    r"^(how|what|what's|when|where|which|who|whom|whose|why|can|could|do|does|did|is|are|was|were|will|"
    r"would|should|shall|may|might|must|have|has)\b",
    re.IGNORECASE,
)


def asks(part: str) -> bool:
    """Whether a part of a question asks something, rather than telling the circumstances: of "I lost my
    keyfob, how much is a replacement?" only the second part asks."""
    return _ASKS.match(part) is not None


def sub_questions(question: str) -> list[str]:
    """The questions a question asks: "How much is a locker, and can I get a spare key?" is two. A question
    that asks one thing is returned whole."""
    parts = [p.strip(" ,?") for p in _CLAUSE_SPLIT.split(question) if p and len(words(p)) >= 2]
    return [f"{p[0].upper()}{p[1:]}?" for p in parts] if len(parts) > 1 else [question]
