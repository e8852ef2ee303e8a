"""Condensing: a follow-up made into what is searched for and what relevance is judged against. Runs from a
conversation's second turn, before the follow-up's cache lookup (its key is this stage's result).

- A model profile's condenser rewrites the follow-up as a standalone question in one model call, from the
  earlier turns' questions and answered answers. The rewrite is screened as a question is (the deny-list
  here, the classifier with the rest of screening); a rewrite that is empty, too long, an attack, or only
  the previous question again (it dropped the follow-up's own ask) is blocked with that reason. The rules
  below read the follow-up too, and the rewrite is checked against it (`unfaithful`): one that leaves the
  follow-up's pronoun unresolved, drops all of its own words, adds a figure no question asked, or makes a
  question of a mere "yes" gives way to the rules' reading. A rewrite that passes is searched beside the
  rules' queries and judged first, the rules' reading second (`second_reading`): a small model's rewrite
  and the rules are right on different follow-ups.
- The local profile has no model: a follow-up that leans on the previous question through a pronoun gets
  the previous question's topic in its place ("Is it cheaper for students?" after "How much is Maker
  membership?" -> "Is maker membership cheaper for students?"); one that leaves its subject out ("and for
  students?") is added to the previous question ("How much is Maker membership for students?"); one with a
  subject of its own (a topic switch) stands as asked. It searches with that and with the follow-up as typed,
  and, for a pronoun or a question of its own, with the follow-up joined to the previous question, and fuses
  the rankings (RRF).
  Relevance is judged against that standalone question, which keeps every word of the follow-up's own ask.
- In every profile the previous turn's cited passages join the candidates (`carried`): a short follow-up
  ("and for students?") keeps the evidence it follows from. In the local profile a follow-up that leans on
  the previous turn (a pronoun, an ellipsis, a short question; not a question of its own or an announced new
  subject) has them ranked as one more query's result (`leans`), so they can stand in its top k. They are
  candidates only: each turn's claims are checked against this turn's passages, never against an earlier
  answer.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Sequence
from typing import Literal

import msgspec
import numpy as np

from provenance import text as T
from provenance.claims.vectors import with_calendar
from provenance.ports import Condenser, Usage
from provenance.stages.screen import deny_list_match
from provenance.timing import Timer
from provenance.wire import CondenseStage

# Words that stand for something said before ("is IT cheaper", "THAT'S $50"): the follow-up leans on the
# previous question for its subject.
PRONOUNS = frozenset({"it", "its", "it's", "they", "them", "their", "this", "that", "that's", "these", "those"})
# The pronouns that only stand for something ("this" and "that" also point: "that Friday", "a class that
# costs more"): one of them left in a rewrite was not resolved.
PERSONAL_PRONOUNS = frozenset({"it", "its", "it's", "they", "them", "their"})
PLURAL_PRONOUNS = frozenset({"they", "them", "their", "these", "those"})
# How a follow-up that omits its subject starts ("and for students?", "what about weekends?").
ELLIPSIS_OPENERS = ("and ", "what about ", "how about ", "also ", "same for ", "or ")
# The previous question's topic: its first run of meaningful words, at most this many ("maker membership").
TOPIC_WORDS = 2
# A fragment's word takes the place of the previous question's word most like it ("weekends" for "Tuesday",
# "large" for "small", "third" for "second") when their word vectors are at least this alike: below it the
# nearest word is a mere neighbour (claims/vectors.py SOFT_MATCH_FLOOR is 0.45 for the same model), and
# the fragment is added to the previous question instead.
SLOT_FLOOR = 0.5
# Words a fragment opens with that the word it replaces already has before it ("for the 3D printers" in
# place of "woodshop" in "How much is the woodshop induction?").
_LEADING = frozenset({"a", "an", "the", "for", "on", "in", "at", "to", "with", "during", "of", "about"})
# What a follow-up says before its ask, which asks nothing: an announcement ending in a colon ("Different
# question:", "Switching topics:") or an interjection ("OK,", "Well,").
_ANNOUNCEMENT = re.compile(r"^\s*([^?:]{1,40}):\s+(?=\S)")
_INTERJECTION = re.compile(r"^\s*(?:ok|okay|alright|well|oh|hmm|right)\b[,.!]?\s+", re.IGNORECASE)

Kind = Literal["pronoun", "ellipsis", "replaced", "question", "alone", "switch"]
# Word vectors' cosine similarity, rows for the first words and columns for the second (the embedder's
# normalised vectors: `verifiers.vectors.WordVectors.similarity`).
Similarity = Callable[[Sequence[str], Sequence[str]], np.ndarray]


class Previous(msgspec.Struct, frozen=True):
    """What a follow-up follows: the last turn worked on, and the earlier turns as the model is shown them
    (question, answer when it was answered)."""

    standalone_question: str
    cited_passage_ids: list[str]
    earlier: list[tuple[str, str | None]]


class CondenseOutcome(msgspec.Struct, frozen=True):
    stage: CondenseStage
    standalone: str
    # The queries to search with and fuse; one: the standalone question alone.
    queries: list[str]
    carried: list[str]
    usage: Usage | None = None
    blocked_because: str | None = None
    # An elliptic follow-up's own words ("the large one" of "And the large one?"), stems: an answer must speak
    # to one of them (`speaks_to`), or it answers the previous question again.
    own_terms: list[str] = msgspec.field(default_factory=list)
    # A follow-up that leans on the previous turn (a pronoun, an ellipsis, a short question): the passages the
    # previous answer cited are ranked beside the queries' rankings, not only added after them.
    leans: bool = False
    # A leaning follow-up's own words and the previous answer, when it was answered: an answer that says again
    # what the previous one said must hold one of them (`repeats_previous`). Empty for a follow-up that
    # checks a figure ("So that's $50, right?"), which the documents' figure in the previous answer answers.
    asks: list[str] = msgspec.field(default_factory=list)
    previous_answer: str | None = None
    # A model's rewrite that passed its check (`unfaithful`) is judged first; the rules' reading is a second,
    # judged when the answer to the rewrite is refused as not answering it (pipeline/answering.py).
    second_reading: str | None = None

    @property
    def usages(self) -> list[Usage]:
        return [] if self.usage is None else [self.usage]

    @property
    def blocked(self) -> bool:
        return self.stage.status == "blocked"


def _meaningful(word: str) -> bool:
    return not (word in T.STOPWORDS or word in T.QUESTION_WORDS or word in PRONOUNS or len(word) < 2)


_TOKEN = re.compile(r"[\w'’-]+")


def _spans(text: str) -> list[tuple[int, int, str]]:
    """Each word of text as it is written, with where it stands."""
    return [(m.start(), m.end(), m.group(0)) for m in _TOKEN.finditer(text)]


# What "what" or "which" asks for when one of these follows it ("What time does the space open?"): the
# question's measure, not its topic.
_MEASURES = frozenset({"time", "times", "day", "days", "date", "dates", "year", "month", "hour", "hours", "age"})


def _asking(spans: Sequence[tuple[int, int, str]], i: int) -> bool:
    """Whether the word is part of the ask, not the subject: the word after "how" ("how long", "how quickly",
    "how often") is always the question's measure, never its topic; so is a measure after "what" or "which"
    ("what time", "which day")."""
    if i == 0:
        return False
    before = spans[i - 1][2].lower()
    return before == "how" or (before in ("what", "which") and spans[i][2].lower() in _MEASURES)


_CARRIED = re.compile(r"\(([^()]*)\)\s*[?.!]*\s*$")


def topic(previous: str, plural: bool = False) -> str:
    """The previous question's subject, as written: its first run of meaningful words ("How much is Maker
    membership per month?" -> "Maker membership"); for a plural pronoun ("they", "them") the first run that
    ends in a plural ("Can they bring their kids?" after "How many guests can a member bring?": "guests")."""
    carried = _CARRIED.search(previous)
    if carried and carried.group(1).strip():
        # "Can I go (board meet)?": the subject a short question was given is what a pronoun after it means.
        previous = carried.group(1)
    found: list[tuple[bool, list[str]]] = []  # (after an auxiliary, the run's words)
    spans = _spans(previous)
    gap: list[str] = []  # the words since the last run
    for i, (_, _, w) in enumerate(spans):
        if _meaningful(w.lower()) and not _asking(spans, i):
            if gap or not found:
                found.append((_inverted(gap), []))
            found[-1][1].append(w)
            gap = []
        else:
            gap.append(w.lower())
    runs = [_subject(run, inverted)[:TOPIC_WORDS] for inverted, run in found]
    if plural:
        # "their"/"these" stand for several: a run whose last word is a plural ("guests", not "class").
        for r in runs:
            if len(r[-1]) > 3 and r[-1].lower().endswith("s") and not r[-1].lower().endswith("ss"):
                return " ".join(r)
    return " ".join(runs[0]) if runs else ""


# A question's auxiliary ("When DOES the board meet?", "CAN guests bring their kids?"): the run of words after
# it, with only a determiner between, is its subject and then its main verb.
_AUXILIARIES = frozenset(
    {"do", "does", "did", "can", "could", "will", "would", "should", "shall", "may", "might", "must"}
)
_DETERMINERS = frozenset({"the", "a", "an", "my", "your", "our", "their", "his", "her"})


def _inverted(gap: Sequence[str]) -> bool:
    """Whether the words before a run end in an auxiliary, only determiners after it ("does the")."""
    rest = list(gap)
    while rest and rest[-1] in _DETERMINERS:
        rest.pop()
    return bool(rest) and rest[-1] in _AUXILIARIES


def _subject(run: list[str], inverted: bool) -> list[str]:
    """A run's subject: after an auxiliary (`inverted`), a run of two words is a subject and the question's main
    verb ("board meet" of "When does the board meet?", "training cost" of "How much does training cost?"), and
    the verb is no part of what a pronoun after it stands for. A longer run may hold an object too ("GSA process
    new badges"), so where its verb is can't be told: it is kept as it is."""
    return run[:1] if inverted and len(run) == 2 else run


def clean(follow_up: str) -> tuple[str, bool]:
    """The follow-up without what it says before its ask ("Different question: when is the AGM?" -> "When is
    the AGM?", "OK, where can I leave my bike?" -> "Where can I leave my bike?"), and whether it announced a
    new topic (a remark before a colon): a question that says it changes the subject stands on its own."""
    text = follow_up.strip()
    m = _ANNOUNCEMENT.match(text)
    announced = bool(m) and not any(w in T.QUESTION_WORDS for w in T.words(m.group(1) if m else ""))
    if m and announced:
        text = text[m.end() :]
    text = _INTERJECTION.sub("", text, count=1)
    return (text[:1].upper() + text[1:] if text else follow_up.strip()), announced


def kind_of(follow_up: str) -> Kind:
    """How the follow-up leans on the previous question: through a pronoun, by leaving its subject out
    (ellipsis, or too few words of its own to be a question), or not at all (a question of its own)."""
    said = T.words(follow_up)
    opening = " ".join(follow_up.lower().split())
    elliptic = opening.startswith(ELLIPSIS_OPENERS)
    if any(w in PRONOUNS for w in said) or (not elliptic and _CLOSING_ONE.search(follow_up)):
        return "pronoun"
    if elliptic or len([w for w in said if _meaningful(w)]) <= 1:
        return "ellipsis"
    return "alone"


_PRONOUN = re.compile(
    r"\b(it's|that's|its|it|they|them|their|this|that|these|those)\b|\b(one)(?=\s*[?.!]*\s*$)", re.IGNORECASE
)
# "one" as a question's last word stands for a thing already named ("Do Keyholders have to pay for one?");
# anywhere else it is a number ("one guest").
_CLOSING_ONE = re.compile(r"\bone\s*[?.!]*\s*$", re.IGNORECASE)


def subject_of(question: str) -> str:
    """A question without its asking words and closing mark: "When does the board meet?" -> "board meet"."""
    spans = _spans(question)
    start = next((i for i, (_, _, w) in enumerate(spans) if _meaningful(w.lower()) and not _asking(spans, i)), None)
    if start is None:
        return ""
    return question[spans[start][0] :].strip().rstrip("?.!").strip()


def _fragment(tail: str) -> str | None:
    """An elliptic follow-up's own phrase, when it is a phrase and not a question or a condition ("for the 3D
    printers" -> "3D printers", "the large one" -> "large"); None for "when is someone on duty?", "if the class
    is cancelled?"."""
    words = tail.strip().rstrip("?.!").split()
    if not words or words[0].lower() in T.QUESTION_WORDS or words[0].lower() in ("if", "when", "whether"):
        return None
    while words and words[0].lower() in _LEADING:
        words.pop(0)
    if len(words) > 1 and words[-1].lower() in ("one", "ones"):
        words.pop()  # "the large one": the previous question's noun stays ("a large locker")
    return " ".join(words) or None


def _proper(word: str, position: int) -> bool:
    return position > 0 and word[:1].isupper() and word != "I"


def replace_slot(fragment: str, previous: str, similarity: Similarity) -> str | None:
    """The previous question with its word most like the fragment's in the fragment's place ("What time does
    the space open on a Tuesday?" + "weekends" -> "... open on weekends?"): a name for a name ("And a Maker?"
    after "How many guests can a Community member bring?"), else the nearest word by word vectors when it is
    at least SLOT_FLOOR alike. None when nothing in the previous question is of the fragment's kind."""
    own = [w for w in T.words(fragment) if _meaningful(w)]
    spans = [(i, start, end, w) for i, (start, end, w) in enumerate(_spans(previous)) if _meaningful(w.lower())]
    if not own or not spans:
        return None
    sim = np.asarray(similarity(own, [w.lower() for *_, w in spans]))
    best = sim.max(axis=0)
    names = [n for n, (i, *_, w) in enumerate(spans) if _proper(w, i)]
    fragment_named = any(_proper(w, 1) for w in fragment.split())
    if fragment_named and names:
        # A name stands in for a name ("Maker" for "Community", "Mondays" for "Saturday").
        j = max(names, key=lambda n: best[n])
    else:
        j = int(np.argmax(best))
        if best[j] < SLOT_FLOOR:
            return None
    start, end = spans[j][1], spans[j][2]
    # The previous question's neighbours the fragment names too go with the word ("annual leave" -> "military
    # leave", not "military leave leave").
    stems = {T.stem(w) for w in T.words(fragment)}
    k = j
    while k + 1 < len(spans) and spans[k + 1][0] == spans[k][0] + 1 and T.stem(spans[k + 1][3].lower()) in stems:
        k += 1
        end = spans[k][2]
    k = j
    while k > 0 and spans[k - 1][0] == spans[k][0] - 1 and T.stem(spans[k - 1][3].lower()) in stems:
        k -= 1
        start = spans[k][1]
    if k == j and j > 0 and spans[j - 1][0] == spans[j][0] - 1 and T.stem(spans[j][3].lower()) in stems:
        # The fragment names the word itself, with a word of its own before it: it swaps the word's modifier
        # ("military leave" after "How much annual leave can I carry over?" -> "How much military leave ...",
        # not "annual military leave"). One word, the modifier, never the verb before it.
        start = spans[j - 1][1]
    before = previous[:start]
    if fragment.lower().endswith("s") and not fragment.lower().endswith("ss"):
        before = re.sub(r"\b(?:a|an)\s+$", "", before, flags=re.IGNORECASE)  # "on a Tuesday" -> "on weekends"
    return f"{before}{fragment}{previous[end:]}"


def standalone(follow_up: str, previous: str, similarity: Similarity | None = None) -> tuple[Kind, str]:
    """The local profile's standalone question: the follow-up with its first pronoun replaced by the previous
    question's topic; an elliptic follow-up's phrase in the place of the previous question's word it stands
    for, else after the previous question; a question of its own, itself."""
    asked, announced = clean(follow_up)
    if announced:
        return "switch", asked
    kind = kind_of(asked)
    if kind == "pronoun":
        plural = any(w in PLURAL_PRONOUNS for w in T.words(asked))
        subject = topic(previous, plural=plural)
        if subject:

            def replace(m: re.Match[str]) -> str:
                word = (m.group(1) or m.group(2)).lower()
                if word.endswith("'s"):
                    return f"{subject} is"
                if word == "one":
                    # "one" stands for a thing of the kind named, not that very thing: the topic's noun, its
                    # modifiers left behind ("Do Keyholders pay for one?" after "How much is a large locker?":
                    # "... pay for a locker?", not "for large locker").
                    noun = subject.split()[-1]
                    determined = asked[: m.start()].split()[-1:] in (["a"], ["an"], ["the"], ["each"], ["any"])
                    return noun if determined else f"{'an' if noun[:1].lower() in 'aeiou' else 'a'} {noun}"
                return f"{subject}'s" if word in ("its", "their") else subject

            return kind, _PRONOUN.sub(replace, asked, count=1)
    if kind == "ellipsis" and previous:
        tail = asked
        lowered = tail.lower()
        for opener in ELLIPSIS_OPENERS:
            if lowered.startswith(opener):
                tail = tail[len(opener) :].lstrip()
                break
        fragment = _fragment(tail)
        if fragment is not None and similarity is not None:
            put = replace_slot(fragment, previous.strip(), similarity)
            if put is not None:
                return "replaced", put
        if T.words(tail)[:1] and T.words(tail)[0] in T.QUESTION_WORDS:
            # A question of its own with too few words to name its subject ("Can I go?" after "When does the
            # board meet?"): the previous question's subject beside it, not its ask ("when"), which would
            # make the answer expected a time.
            about = subject_of(previous)
            if about:
                asked_part = tail.rstrip("?.! ")
                return "question", f"{asked_part[:1].upper()}{asked_part[1:]} ({about})?"
        # "And for students?" after "How much is Maker membership?": "How much is Maker membership for
        # students?". The previous question's words stay, the follow-up's own come last.
        return "ellipsis", f"{previous.strip().rstrip('?.!').rstrip()} {tail}"
    return "alone" if kind == "pronoun" else kind, asked


_KINDS: dict[Kind, str] = {
    "pronoun": "a pronoun replaced by the previous question's topic",
    "ellipsis": "an elliptic follow-up read after the previous question",
    "replaced": "an elliptic follow-up's phrase put in the place of the previous question's word it stands for",
    "question": "a short question given the previous question's subject",
    "alone": "a question of its own: judged as asked, searched also after the previous question",
    "switch": "a new subject, announced: searched and judged as asked",
}


def _bad_rewrite(rewrite: str, previous: str, max_chars: int) -> str | None:
    if not rewrite.strip():
        return "the rewrite was empty"
    if len(rewrite) > max_chars:
        return f"the rewrite is longer than {max_chars} characters"
    if deny_list_match(rewrite) is not None:
        return "the rewrite looks like an attempt to change the rules"
    if T.normalise_question(rewrite) == T.normalise_question(previous):
        return "the rewrite only repeats the previous question, without the follow-up's own ask"
    return None


async def condense(
    question: str,
    previous: Previous,
    condenser: Condenser | None,
    *,
    max_chars: int,
    similarity: Similarity | None = None,
) -> CondenseOutcome:
    """`similarity`: the local method's word vectors (a fragment put in the place of the word it stands for);
    without it an elliptic fragment is added to the previous question."""
    timer = Timer()
    carried = list(previous.cited_passage_ids)
    if similarity is None:
        kind, reading = standalone(question, previous.standalone_question)
    else:
        # Off the event loop: a word not yet in the vectors' cache is embedded.
        kind, reading = await asyncio.to_thread(standalone, question, previous.standalone_question, similarity)
    # Searched as typed too: a rewrite can miss, and the fused ranking keeps what the follow-up's own words find.
    queries = list(dict.fromkeys([question, reading]))
    if kind in ("alone", "pronoun") and previous.standalone_question:
        # A question of its own may still be about the previous one's ("Do members pay less?"), and a pronoun's
        # reading may pick the wrong subject ("Does that cover primaries?" after "Do I get time off to vote?"
        # read as "time"): searched joined to the previous question too, which names them all. Relevance is
        # still judged against the reading, so what only the previous question wanted is refused.
        queries.append(f"{clean(question)[0]} {previous.standalone_question}")
    own = sorted(T.content_terms(question) - T.content_terms(previous.standalone_question))
    checks_figure = any(ch.isdigit() for ch in question)
    ruled = CondenseOutcome(
        CondenseStage(
            status="ok",
            ms=timer.ms,
            method="fused",
            detail=_KINDS[kind],
            standalone_question=reading,
            queries=queries,
            carried_passage_ids=carried,
        ),
        reading,
        queries,
        carried,
        own_terms=own if kind in ("ellipsis", "replaced") else [],
        leans=kind in ("pronoun", "ellipsis", "replaced", "question"),
        # A short question given the previous subject ("Can I go?") has too few words of its own to hold.
        asks=own if kind in ("pronoun", "ellipsis", "replaced") and not checks_figure else [],
        previous_answer=previous.earlier[-1][1] if previous.earlier else None,
    )
    if condenser is None:
        return ruled
    # A failed call raises ModelError, which the pipeline answers as it answers any model's failure.
    condensed = await condenser.condense(question, previous.earlier)
    rewrite = " ".join(condensed.standalone.split())
    usage = condensed.usage
    stage = CondenseStage(
        status="ok",
        ms=timer.ms,
        method="model",
        model=condenser.name,
        carried_passage_ids=carried,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
    )
    bad = _bad_rewrite(rewrite, previous.standalone_question, max_chars)
    if bad:
        blocked = msgspec.structs.replace(stage, status="blocked", detail=bad)
        return CondenseOutcome(blocked, question, [], carried, usage, bad)
    asked_before = " ".join([*(q for q, _ in previous.earlier), previous.standalone_question])
    doubt = unfaithful(rewrite, question, asked_before, kind)
    if doubt:
        # Not the follow-up's question: not searched or judged against. The rules' reading stands in.
        detail = f"the model's rewrite ({rewrite}) {doubt}: the rules' reading is used instead"
        stage = msgspec.structs.replace(stage, detail=detail, standalone_question=reading, queries=queries)
        return msgspec.structs.replace(ruled, stage=stage, usage=usage)
    # The rewrite is searched beside the rules' queries and fused with them (each finds what the other misses),
    # and judged first; the rules' reading is the second, judged when the rewrite's answer doesn't answer it.
    queries = list(dict.fromkeys([rewrite, *queries]))
    second = None if T.normalise_question(reading) == T.normalise_question(rewrite) else reading
    stage = msgspec.structs.replace(stage, standalone_question=rewrite, queries=queries)
    return msgspec.structs.replace(
        ruled, stage=stage, standalone=rewrite, queries=queries, usage=usage, second_reading=second
    )


# Words that reply rather than ask ("yes", "ok, thanks"): a follow-up of only these has no ask of its own, and a
# rewrite of it can only be a question the model made up.
_REPLIES = frozenset(
    {"yes", "yeah", "yep", "no", "nope", "ok", "okay", "sure", "thanks", "thank", "please", "right", "correct", "great"}
)


def unfaithful(rewrite: str, follow_up: str, asked_before: str, kind: Kind) -> str | None:
    """Why a model's rewrite is not the follow-up's question, or None. It must resolve the follow-up's pronouns,
    keep at least one of the follow-up's own words (those no earlier question used; a paraphrase may reword the
    rest), and add no figure that no question asked (one from an earlier answer: "Can I go?" is not "Can I go
    to the 7 pm meeting?"). A follow-up of only "yes" or "thanks" asks nothing, so any rewrite of it is the
    model's own question."""
    said = T.words(follow_up)
    if not [w for w in said if w not in _REPLIES and w not in T.STOPWORDS]:
        return "asks what the follow-up, a reply, did not ask"
    written, told = T.words(rewrite), T.content_terms(follow_up)
    if kind == "pronoun" and (
        {w for w in said if w in PERSONAL_PRONOUNS} & set(written)
        or _CLOSING_ONE.search(rewrite) is not None
        or T.content_terms(rewrite) <= told
    ):
        return "keeps the follow-up's pronoun unresolved"
    own = told - T.content_terms(asked_before)
    if own and not own & T.content_terms(rewrite):
        return f"drops the follow-up's own words ({', '.join(sorted(own))})"
    added = T.numbers(rewrite) - T.numbers(follow_up) - T.numbers(asked_before)
    if added:
        return f"adds figures no question asked ({', '.join(sorted(added))})"
    return None


def speaks_to(own_terms: Sequence[str], claims: Sequence[str]) -> bool:
    """Whether every claim holds one of an elliptic follow-up's own words: read after the previous question,
    "And the large one?" can be answered with the small one's price too, which holds none of them and answers
    the previous question again."""
    own = set(own_terms)
    return not own or all(_terms(c) & own for c in claims)


def _terms(text: str) -> set[str]:
    """The text's content terms, "weekend" with a Saturday and "weekday" with a Monday (claims/vectors.py)."""
    return set(with_calendar({t: t for t in T.content_terms(text)}))


def fuse(rankings: Sequence[Sequence[str]], k: int, rrf_k: int = 60) -> list[str]:
    """Reciprocal-rank fusion of several rankings of passage ids: the top `k`."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, pid in enumerate(ranking):
            scores[pid] = scores.get(pid, 0.0) + 1.0 / (rrf_k + rank + 1)
    return sorted(scores, key=lambda pid: -scores[pid])[:k]


def repeats_previous(asks: Sequence[str], previous_answer: str | None, claims: Sequence[str], scoped: str) -> bool:
    """Whether an answer to a follow-up says again what the previous answer said (a claim of it word for word)
    with none of the follow-up's own words (`scoped`: the claims with their passages' headings): read against
    the carried passages, "What's the hourly rate for it?" after "Do I need approval before working extra
    hours?" is answered with the approval sentence again, which answers the previous question, not this one."""
    if not asks or not previous_answer:
        return False
    if not any(T.quoted_in(c.rstrip(".!?"), previous_answer) for c in claims):
        return False
    return not set(asks) & _terms(scoped)
