"""Small text analysis shared by the local generator, verifier and lexical check; sentence boundaries come
from a maintained segmenter (pysbd), everything else is dependency-free."""

from __future__ import annotations

import re
from collections.abc import Sequence
from functools import lru_cache
from pathlib import Path

import pysbd

_WORDS_DIR = Path(__file__).resolve().parent / "data" / "words"


def word_list(name: str) -> list[str]:
    """data/words/<name>.txt: one word a line, in order; lines starting with # say what the list is for."""
    lines = (_WORDS_DIR / f"{name}.txt").read_text(encoding="utf-8").splitlines()
    return [word for line in lines if (word := line.strip()) and not word.startswith("#")]


# Read once, at import.
STOPWORDS = frozenset(word_list("stopwords"))
# Words that ask rather than inform: they carry no content for coverage checks.
QUESTION_WORDS = frozenset(word_list("question_words"))
# Everyday words that name no topic of their own ("what happens if...") and phrasal verbs' particles.
QUESTION_FILLER = frozenset(word_list("question_filler"))
NEGATIONS = frozenset(word_list("negations"))
MONTHS = word_list("months")
_MONTHS = frozenset(MONTHS)
DAYS = word_list("days")
# A time of day, however it is written: "9am", "9:30 pm", "9 a.m.", "9:30", "noon", "midnight".
TIME = re.compile(
    r"\b\d{1,2}(?::\d{2})?\s?(?:(?:am|pm)\b|[ap]\.m\.)|\b(?:noon|midnight|\d{1,2}:\d{2})\b", re.IGNORECASE
)
_WORD = re.compile(r"[a-z0-9]+(?:['’][a-z]+)?(?:[.,:][0-9]+)*")
_NUMBER = re.compile(r"(?<![\w.])[$£€]?\d+(?:[.,:]\d+)*(?:\s?%)?")
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
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


# Words after which "one" may stand for a thing already named rather than count it.
_DETERMINERS = frozenset({"a", "an", "the", "this", "that", "which", "what", "each", "every", "any", "another", "no"})


def _stands_for_a_thing(ws: Sequence[str], i: int) -> bool:
    """Whether the "one" at `ws[i]` is a pronoun ("a new one", "which one is", "no one"): a determiner one or
    two words before it and no word that carries meaning after it. "One guest", "only one", "at least one
    locker" and "the one guest" still count 1."""
    after = ws[i + 1] if i + 1 < len(ws) else None
    return any(w in _DETERMINERS for w in ws[max(0, i - 2) : i]) and (after is None or after in STOPWORDS)


def numbers(text: str) -> set[str]:
    """Numbers as written, normalised: '$14', '14', '9:30', '50%' (currency sign kept: $14 is not 14 days);
    number words too, but not a "one" that stands for a thing ("What do I pay for a new one?" names no
    number)."""
    found = set()
    for m in _NUMBER.findall(text):
        value = m.replace(" ", "").replace(",", "")
        if value.endswith(".00"):
            value = value[:-3]
        found.add(value)
    ws = words(text)
    for i, w in enumerate(ws):
        if w in _NUMBER_WORDS and not (w == "one" and _stands_for_a_thing(ws, i)):
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


def numbers_and_months_stated(claim: str, support: str) -> bool:
    """The one rule for numbers and dates, the support check's veto (claims/support.py) and the lexical
    check's cap (stages/lexical.py) alike: every number of the claim is in the support (an amount with its
    currency, `unsupported_numbers`), and so is every month it names."""
    return not unsupported_numbers(claim, support) and months(claim) <= months(support)


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


# The segmenter that decides a passage's sentence units (stored with them: db/migrations/006). pysbd, the
# Golden Rules segmenter: it knows abbreviations ("U.S.", "e.g.", "a.m.", "Dr."), decimals, initials and
# ellipses, which the hand rule it replaced cut at ("The U.S. General ..." was two sentences). Measured
# beside that rule in tests/test_segmenter.py and the issue-33 report. A new version is a new key, so stored
# spans are recomputed, never mixed.
SEGMENTER_VERSION: str = f"pysbd-{pysbd.__version__}"
_SEGMENTER = pysbd.Segmenter(language="en", clean=False)
# A list item's bullet or number: the one pattern, for sentence units here and the reader's masking
# (inference.cross_encoders).
LIST_BULLET = r"(?:[-*+•◦]|\d+[.)])"
_LIST_MARKER = re.compile(LIST_BULLET + r"\s+")
_CODE_INDENT = "    "


# Where a sentence could end inside a unit: a stop, with or without a closing quote or bracket, then a space;
# or an inline list's next item ("1) this 2) that"), which the segmenter splits too.
_MAY_END = re.compile(r"[.!?…][\"'’”)\]]*\s|\s\d{1,2}[.)]|[•⁃]")


@lru_cache(maxsize=65536)
def _segment(unit: str) -> tuple[str, ...]:
    # A unit with no stop before a space is one sentence whatever the segmenter reads (a list item, a table
    # row, a short sentence), and asking it costs milliseconds: most units are these.
    if not _MAY_END.search(unit.rstrip()):
        return (unit,)
    return tuple(_SEGMENTER.segment(unit))


def _unit_spans(text: str, start: int, end: int) -> list[tuple[int, int]]:
    """The sentences of one unit, text[start:end] (a paragraph, a list item, a table row), by the segmenter,
    which reads the unit whole (its list marker tells it an inline list follows); the marker itself is not
    part of the first sentence."""
    while start < end and text[start].isspace():
        start += 1
    unit = text[start:end].replace("\n", " ")  # same length: offsets into the unit are offsets into text
    if not unit.strip():
        return []
    out: list[tuple[int, int]] = []
    pos = 0
    for piece in _segment(unit):
        at = unit.find(piece, pos) if piece else -1
        if at < 0:  # the segmenter kept every character (clean=False); a miss is a piece it rewrote
            continue
        pos = at + len(piece)
        a, b = at, at + len(piece)
        if not out and a == 0 and (marker := _LIST_MARKER.match(unit, 0, b)):
            a = marker.end()
        while a < b and unit[a].isspace():
            a += 1
        while b > a and unit[b - 1].isspace():
            b -= 1
        if b - a > 1:
            out.append((start + a, start + b))
    return out


@lru_cache(maxsize=16384)
def _spans(text: str) -> tuple[tuple[int, int], ...]:
    out: list[tuple[int, int]] = []
    for para in re.finditer(r"(?:[^\n]|\n(?![ \t]*\n))+", text):
        lines = [m for m in re.finditer(r"[^\n]+", para.group(0)) if m.group(0).strip()]
        if not lines:
            continue
        base = para.start()
        if all(m.group(0).startswith(_CODE_INDENT) for m in lines):
            # A code block: one unit, never split (provenance.ingest.documents.markdown indents its lines).
            a = base + lines[0].start() + len(lines[0].group(0)) - len(lines[0].group(0).lstrip())
            out.append((a, base + lines[-1].end()))
            continue
        if any(_LIST_MARKER.match(m.group(0).lstrip()) for m in lines):
            # A list: each item (each line) is a unit of its own, ended even without a final period.
            for m in lines:
                out.extend(_unit_spans(text, base + m.start(), base + m.end()))
            continue
        # Prose: the paragraph's lines are one unit, however they were wrapped.
        out.extend(_unit_spans(text, base + lines[0].start(), base + lines[-1].end()))
    return tuple(out)


def sentence_spans(text: str) -> list[tuple[int, int]]:
    """The sentence units of `text` as [start, end) code-point offsets: a passage's, decided once at ingest
    and stored (`passage_sentences`), or an answer's. Paragraphs (blank-line separated) are read apart; in a
    list each item is a unit; a code block (every line indented four spaces) is one; prose is split by the
    segmenter. List markers are not part of a sentence."""
    return list(_spans(text))


def split_sentences(text: str) -> list[str]:
    """Sentences of a passage or an answer (single-spaced); each list item counts as one."""
    return [_single_spaced(text[a:b]) for a, b in _spans(text)]


def section_path(heading: str) -> str:
    """A passage's breadcrumb below its document's title ("Benefits > Health > Dental" -> "Health >
    Dental"): the context its sentences are read with. A passage of the title's own has the title."""
    parts = heading.split(" > ")
    return " > ".join(parts[1:]) or parts[0]


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
def _sentence_set(text: str, spans: tuple[tuple[int, int], ...] | None = None) -> frozenset[str]:
    return frozenset(s for _, _, s in sentence_ranges(text, spans))


def is_sentence_of(claim: str, text: str, spans: Sequence[tuple[int, int]] | None = None) -> bool:
    """Whether `claim` is one whole sentence of `text`, word for word. A mere substring is not enough:
    "the fee is $30" inside "If you join before May, the fee is $30" says something else."""
    return _single_spaced(claim) in _sentence_set(text, tuple(spans) if spans else None)


def sentence_ranges(text: str, spans: Sequence[tuple[int, int]] | None = None) -> list[tuple[int, int, str]]:
    """Each sentence of `text` with its [start, end) in `text` and its words single-spaced: by `spans` when
    given (a passage's stored ones), else by `sentence_spans`."""
    return [(a, b, _single_spaced(text[a:b])) for a, b in (spans if spans else _spans(text))]


def sentences_around(text: str, start: int, end: int, spans: Sequence[tuple[int, int]] | None = None) -> str:
    """The sentence(s) of `text` holding characters [start, end), joined; empty when none does."""
    hit = [s for a, b, s in sentence_ranges(text, spans) if a < end and b > start]
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
