"""Support: do the passages state the claim? Judged on this machine, in every profile, and without the
question: a claim is stated by the passages or it isn't, whatever was asked.

A claim is compared with each sentence of each passage, and with each pair of sentences that may be read
together (neighbours, or two that share a word: a definition and the fact that uses it), with the passage's
heading as context. A faithful restatement passes, quoted or reworded ("Replacing a fob costs $15" for "A
replacement keyfob costs $15."): its words are the window's, as part of a compound ("fob"/"keyfob") or as
near-synonyms, and words a restatement adds without adding a fact ("you get", "it requires") don't count.
A changed fact fails:
- a number, amount, time, unit of time, month, email address or name that no single sentence of the window
  states together with the claim's other such facts (the Maker rate given as the concession rate, a guest
  limit given to the wrong tier, $10 a month for $10 a week) is vetoed;
- so is a claim that borrows its words from a sentence about another thing of the same kind (another
  price, day, size or name): such sentences are never read together with the one that states the claim's
  facts, and a word picking one thing out of several ("standard", "Tuesday") that the passage binds to
  other facts vetoes the claim;
- so is a flipped rule: the claim and the sentence that shares most of its words disagree on whether they
  deny or restrict ("may" for "must not"; "only" and "except" restrict);
- an added clause brings words the window lacks, which the score counts against the claim;
- a claim that opens with a word pointing outside it ("the latter", "it") is not self-contained, and its
  support is capped: what it states depends on a sentence it doesn't include.

The score is a logistic model over three named features (coverage, added, similarity) whose weights are
set from `evals/calibrate_support.py`'s report on hand-written pairs (see `support_source` in
`data/local_verifier.json`); the vetoes cap it.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence

import msgspec
import numpy as np

from provenance import text as T
from provenance.claims.rules import LogisticModel
from provenance.claims.vectors import SentenceEmbeddings, WordVectors, soft_match, surface_terms
from provenance.ports import CorpusText, PassageSupport, ScoredPassage, SupportFeatures

# A claim quoted word for word is what the passage says: certain, not an estimate.
QUOTED_SUPPORT = 1.0
# The cap on a claim with a number, date or name that no sentence states with the rest of its facts.
FACT_VETO = 0.02
# The cap on a claim whose rule is the passage's, flipped.
NEGATION_VETO = 0.05
# The cap on a claim that is not self-contained: it opens with a word that points outside it ("the latter",
# "it", "they"), so what it states depends on a sentence it doesn't include, and the passages can't be said
# to state it. A whole sentence quoted word for word is exempt: the passage states it as it stands.
NOT_SELF_CONTAINED_CAP = 0.3
_POINTS_OUTSIDE = re.compile(
    r"^\W*(the (former|latter)|it|its|they|their|them|this|these|those|he|she|his|her|such)\b", re.IGNORECASE
)
# A word that only starts or ends another of at least this many letters is the same word ("fob"/"keyfob",
# "replac"/"replacement").
COMPOUND_MIN = 3

# A clause boundary inside a sentence: "No fee is charged while paused, but locker rent continues..."
_CLAUSES = re.compile(r",?\s+(?:but|whereas|although)\s+|;\s*|,\s+and\s+|:\s+", re.IGNORECASE)
# Words that restrict or deny, beside the negations: "only Keyholders may" says what "may not, except
# Keyholders" says.
_RESTRICTS = re.compile(r"\bnon-?\w|\b(only|except|unless|without)\b", re.IGNORECASE)
# "At no cost" is "free", not a denial.
_NO_COST = re.compile(r"\b(at )?no (extra |additional )?(cost|charge)\b|\bfree of charge\b", re.IGNORECASE)
# Words a restatement adds without adding a fact ("you get", "it costs", "members have"): not counted as
# what the claim says beyond its evidence (data/words/light.txt).
LIGHT_WORDS = frozenset(T.word_list("light"))
# Words that must match exactly, never as near-synonyms, and that pick one thing out of several: "Tuesday" is
# not "Monday", "March" not "May", the concession rate not the standard one (data/words/exact.txt).
_EXACT = re.compile(rf"^({'|'.join(map(re.escape, T.word_list('exact')))})s?$", re.IGNORECASE)


def negated(text: str) -> bool:
    text = _NO_COST.sub("free", text)
    return T.has_negation(text) or _RESTRICTS.search(text) is not None


def clauses(text: str) -> list[str]:
    return [c for c in _CLAUSES.split(text) if len(T.words(c)) >= 2] or [text]


class _Sentence(msgspec.Struct, frozen=True):
    start: int
    end: int
    text: str
    terms: dict[str, str]


class _Clause(msgspec.Struct, frozen=True):
    text: str
    names: set[str]
    numbers: set[str]
    months: set[str]
    emails: set[str]
    units: set[str]

    @property
    def has_facts(self) -> bool:
        return bool(self.names or self.numbers or self.months or self.emails or self.units)


# Units of time are facts like numbers ("$10 per week" is not "$10 per month"); a unit may be stated as
# its equivalent ("a year" for "12 months").
_UNITS = {"minute": "minute", "hour": "hour", "day": "day", "week": "week", "month": "month", "year": "year"}
_UNIT_EQUIVALENTS = {"year": ("12 month",), "week": ("7 day", "seven day"), "month": ("30 day",), "day": ("24 hour",)}


_DAYS = T.DAYS
_DAY_NAME = "|".join(_DAYS)
_DAY_RANGE = re.compile(rf"\b({_DAY_NAME})s?\s+(?:to|through|until|-|–)\s+({_DAY_NAME})s?\b", re.IGNORECASE)


def _days_within(text: str) -> dict[str, str]:
    """The days a range names without writing them: "Tuesday to Friday" holds Wednesday and Thursday."""
    out: dict[str, str] = {}
    for m in _DAY_RANGE.finditer(text):
        first, last = _DAYS.index(m.group(1).lower()), _DAYS.index(m.group(2).lower())
        for day in _DAYS[first : last + 1] if first <= last else []:
            out[day] = day
    return out


def _units(text: str) -> set[str]:
    return {_UNITS[T.stem(w)] for w in T.words(text) if T.stem(w) in _UNITS}


def _states_unit(unit: str, sentence: str) -> bool:
    lowered = " ".join(T.stem(w) for w in T.words(sentence))
    return unit in _units(sentence) or any(e in lowered for e in _UNIT_EQUIVALENTS.get(unit, ()))


class RuleSupport:
    """Scores claims against passages, without the question, by rules over words, facts and embeddings: the
    `SupportCheck` every local verifier uses unless given another."""

    name = "rules"

    def __init__(self, sentences: SentenceEmbeddings, words: WordVectors, model: LogisticModel) -> None:
        self.sentences = sentences
        self.words = words
        self.model = model
        # Words the corpus writes capitalised mid-sentence more often than not (tiers, rooms, people): a claim
        # that names one must name the one its evidence does, wherever in the claim it stands.
        self.names: set[str] = set()

    def set_corpus(self, passages: Sequence[CorpusText]) -> None:
        capitalised: Counter[str] = Counter()
        lower: Counter[str] = Counter()
        # By the spans ingest stored: splitting every passage again took 13 s of CPU at each start on the
        # 18F handbook (the segmenter costs about 6 ms a passage).
        for text, spans in passages:
            for _, _, sentence in T.sentence_ranges(text, spans):
                for i, token in enumerate(re.findall(r"[A-Za-z][\w'’-]*", sentence)):
                    if token[0].isupper() and i > 0:
                        capitalised[T.stem(token.lower())] += 1
                    elif token[0].islower():
                        lower[T.stem(token)] += 1
        self.names = {w for w, n in capitalised.items() if n > lower[w] and w not in T.STOPWORDS}

    # --- one claim against one passage ------------------------------------------------------------

    def _sentences(self, passage: ScoredPassage) -> list[_Sentence]:
        return [
            _Sentence(start, end, text, surface_terms(text) | _days_within(text))
            for start, end, text in T.sentence_ranges(passage.text, passage.sentences)
        ]

    def _clauses(self, claim: str) -> list[_Clause]:
        out = []
        for text in clauses(claim):
            names = {t for t in surface_terms(text) if t in self.names}
            names |= {e for e in T.entities(text) if len(e) > 1 and not e.isdigit()}
            out.append(_Clause(text, names, T.numbers(text), T.months(text), T.emails(text), _units(text)))
        return out

    @staticmethod
    def _facts_in(clause: _Clause, sentence: _Sentence, heading: dict[str, str]) -> bool:
        return (
            T.numbers_and_months_stated(clause.text, sentence.text)
            and clause.emails <= T.emails(sentence.text)
            and all(_states_unit(u, sentence.text) for u in clause.units)
            and all(n in sentence.terms or n in heading for n in clause.names)
            and (not clause.emails or _shares_most(clause.text, sentence, heading))
        )

    def _facts_stated(self, parts: Sequence[_Clause], window: Sequence[_Sentence], heading: dict[str, str]) -> bool:
        """Each clause's numbers, months and names stand together in one sentence of the window (the heading
        names what its sentences are about)."""
        return all(
            any(self._facts_in(c, s, heading) for s in window) for c in parts if c.names or c.numbers or c.months
        )

    def _bound_elsewhere(
        self, parts: Sequence[_Clause], sentences: Sequence[_Sentence], heading: dict[str, str]
    ) -> bool:
        """A clause whose facts stand in one sentence, with a word picking out one of several things that the
        passage binds to other facts of the same kind in another: "A standard locker ... costs $22" where $22
        is the large locker's price and the standard one's $14."""
        for clause in parts:
            if not clause.has_facts:
                continue
            # Only the words that pick one thing out of several (a tier, a size, a day, a name): any other word
            # may be a restatement's own.
            terms = {t for t, w in surface_terms(clause.text).items() if _EXACT.match(w) or t in self.names}
            facts = self._facts_by_kind(clause.text, set(surface_terms(clause.text)))
            anchors = [s for s in sentences if self._facts_in(clause, s, heading)]
            if anchors and all(self._conflicts(a, terms, facts, sentences, heading) for a in anchors):
                return True
        return False

    def _facts_by_kind(self, text: str, terms: set[str]) -> dict[str, set[str]]:
        numbers = T.numbers(text)
        times = {m.group(0).replace(" ", "").lower() for m in T.TIME.finditer(text)}
        return {
            "money": {n for n in numbers if n[0] in "$£€"},
            "percent": {n for n in numbers if n.endswith("%")},
            "time": times,
            "number": {n for n in T.bare_numbers(text) if not any(n in t for t in times)}
            - {n.lstrip("$£€").rstrip("%") for n in numbers if n[0] in "$£€" or n.endswith("%")},
            "name": {t for t in terms if t in self.names},
            "email": T.emails(text),
        }

    def _conflicts(
        self,
        anchor: _Sentence,
        terms: set[str],
        facts: dict[str, set[str]],
        sentences: Sequence[_Sentence],
        heading: dict[str, str],
    ) -> bool:
        for t in terms - set(anchor.terms) - set(heading):
            for other in sentences:
                if other is anchor or t not in other.terms:
                    continue
                theirs = self._facts_by_kind(other.text, set(other.terms))
                # The same kind of fact, different on both sides: the word goes with their value, not ours.
                if _differ(facts, theirs):
                    return True
        return False

    def _coverage(self, claim_terms: dict[str, str], window_terms: dict[str, str]) -> list[float]:
        scores: dict[str, float] = {}
        missing = []
        for stem_, word in claim_terms.items():
            if stem_ in window_terms or any(_compound(stem_, other) for other in window_terms):
                scores[stem_] = 1.0
            elif _EXACT.match(word) or stem_ in self.names:
                scores[stem_] = 0.0
            else:
                missing.append(word)
        if missing:
            sims = self.words.similarity(missing, list(window_terms.values()))
            for word, row in zip(missing, sims, strict=True):
                scores[T.stem(word)] = soft_match(float(row.max())) if row.size else 0.0
        return list(scores.values())

    def score(self, claim: str, claim_vec: np.ndarray, passage: ScoredPassage) -> PassageSupport:
        sentences = self._sentences(passage)
        if T.is_sentence_of(claim, passage.text, passage.sentences):
            hit = next((s for s in sentences if " ".join(s.text.split()) == " ".join(claim.split())), None)
            start, end = (hit.start, hit.end) if hit else (0, len(passage.text))
            return PassageSupport(passage.id, QUOTED_SUPPORT, True, start, end)
        if not sentences:
            return PassageSupport(passage.id, 0.0, False, 0, 0)
        if _POINTS_OUTSIDE.match(claim):
            return PassageSupport(passage.id, NOT_SELF_CONTAINED_CAP, False, 0, 0, veto="not_self_contained")
        # Numbers are checked as facts, not as words to cover.
        claim_terms = {k: v for k, v in surface_terms(claim).items() if not k.isdigit() and v not in LIGHT_WORDS}
        heading = surface_terms(passage.heading)
        parts = self._clauses(claim)
        sims = self.sentences.get([s.text for s in sentences]) @ claim_vec
        bound_elsewhere = self._bound_elsewhere(parts, sentences, heading)
        best: PassageSupport | None = None
        # One sentence, or any two of the passage: a restatement may join a definition ("Staffed hours are when
        # a floor steward is on duty") to a fact stated elsewhere ("On Saturday the staffed hours are...").
        # Never two sentences where one states other facts of a kind the claim states (another day, price or
        # name): the claim's words would be borrowed from what the passage says of something else.
        ours = self._facts_by_kind(claim, set(surface_terms(claim)))
        clean = [not _differ(ours, self._facts_by_kind(s.text, set(s.terms))) for s in sentences]
        # Two sentences apart must share a word to be read together: a definition and the fact that uses it.
        windows = [[i] for i in range(len(sentences))] + [
            [i, j]
            for i in range(len(sentences))
            for j in range(i + 1, len(sentences))
            if clean[i] and clean[j] and (j == i + 1 or _related(sentences[i], sentences[j]))
        ]
        for rows in windows:
            window = [sentences[k] for k in rows]
            terms: dict[str, str] = dict(heading)
            for s in window:
                terms.update(s.terms)
            covered = self._coverage(claim_terms, terms) if claim_terms else [1.0]
            features = SupportFeatures(
                coverage=round(sum(covered) / len(covered), 4),
                added=round(sum(1.0 - c for c in covered), 4),
                similarity=round(max(0.0, max(float(sims[k]) for k in rows)), 4),
            )
            p, veto = self.model.probability(features), None
            if bound_elsewhere or not self._facts_stated(parts, window, heading):
                p, veto = min(p, FACT_VETO), "fact_not_stated"
            elif _negation_flipped(claim, " ".join(s.text for s in window)):
                p, veto = min(p, NEGATION_VETO), "negation_flipped"
            if best is None or p > best.score:
                best = PassageSupport(passage.id, p, False, window[0].start, window[-1].end, features, veto)
        assert best is not None
        return msgspec.structs.replace(best, score=round(best.score, 4))

    def check(self, claims: Sequence[str], passages: Sequence[ScoredPassage]) -> list[list[PassageSupport]]:
        """Every claim against every passage."""
        if not claims:
            return []
        vectors = self.sentences.get(list(claims))
        return [[self.score(c, v, p) for p in passages] for c, v in zip(claims, vectors, strict=True)]


# An address is for one purpose: the sentence that gives it must say most of what the claim says it is for.
EMAIL_CONTEXT = 0.5


def _shares_most(clause: str, sentence: _Sentence, heading: dict[str, str]) -> bool:
    terms = {t for t, w in surface_terms(clause).items() if w not in LIGHT_WORDS and "@" not in w and not t.isdigit()}
    have = set(sentence.terms) | set(heading)
    shared = sum(1 for t in terms if t in have or any(_compound(t, h) for h in have))
    return not terms or shared / len(terms) >= EMAIL_CONTEXT


def _related(a: _Sentence, b: _Sentence) -> bool:
    shared = set(a.terms) & set(b.terms)
    return any(not t.isdigit() and a.terms[t] not in LIGHT_WORDS for t in shared)


def _differ(ours: dict[str, set[str]], theirs: dict[str, set[str]]) -> bool:
    """Whether a sentence states facts of a kind the claim states, without the claim's: it is about another
    price, day, size or name."""
    return any(ours[k] - theirs[k] and theirs[k] for k in ours)


def _compound(a: str, b: str) -> bool:
    """One word as the head or the stem of the other: "fob"/"keyfob", "space"/"makerspace",
    "replac"/"replacement"."""
    short, long_ = (a, b) if len(a) <= len(b) else (b, a)
    if len(short) < COMPOUND_MIN or short == long_ or short.isdigit():
        return False
    return long_.endswith(short) or (len(short) > COMPOUND_MIN and long_.startswith(short))


def _negation_flipped(claim: str, window: str) -> bool:
    """Whether the claim and the sentence of the window that shares most of its words disagree on whether
    they deny or restrict. Whole sentences, not clauses: a restatement moves the "not" between clauses
    ("If you haven't turned up, the booking is released" for "...is released if the member has not
    arrived")."""
    sentences = T.split_sentences(window)
    terms = T.content_terms(claim)
    if not sentences or not terms:
        return False
    closest = max(sentences, key=lambda s: len(terms & T.content_terms(s)))
    return negated(claim) != negated(closest)
