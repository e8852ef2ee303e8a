"""Condensing: a follow-up made into what is searched for and what relevance is judged against. Runs from a
conversation's second turn, before the follow-up's cache lookup (its key is this stage's result).

- A model profile's condenser rewrites the follow-up as a standalone question in one model call, from the
  earlier turns' questions and answered answers. The rewrite is screened as a question is (the deny-list
  here, the classifier with the rest of screening); a rewrite that is empty, too long, an attack, or only
  the previous question again (it dropped the follow-up's own ask) is blocked with that reason.
- The local profile has no model: a follow-up that leans on the previous question through a pronoun gets
  the previous question's topic in its place ("Is it cheaper for students?" after "How much is Maker
  membership?" -> "Is maker membership cheaper for students?"); one that leaves its subject out ("and for
  students?") is added to the previous question ("How much is Maker membership for students?"); one with a
  subject of its own (a topic switch) stands as asked. It searches with that and with the follow-up as typed,
  and fuses the two rankings (RRF).
  Relevance is judged against that standalone question, which keeps every word of the follow-up's own ask.
- In every profile the previous turn's cited passages join the candidates (`carried`): a short follow-up
  ("and for students?") keeps the evidence it follows from. They are candidates only: each turn's claims are
  checked against this turn's passages, never against an earlier answer.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Literal

import msgspec

from provenance import text as T
from provenance.ports import Condenser, Usage
from provenance.stages.screen import deny_list_match
from provenance.timing import Timer
from provenance.wire import CondenseStage

# Words that stand for something said before ("is IT cheaper", "THAT'S $50"): the follow-up leans on the
# previous question for its subject.
PRONOUNS = frozenset({"it", "its", "it's", "they", "them", "their", "this", "that", "that's", "these", "those"})
# How a follow-up that omits its subject starts ("and for students?", "what about weekends?").
ELLIPSIS_OPENERS = ("and ", "what about ", "how about ", "also ", "same for ", "or ")
# The previous question's topic: its first run of meaningful words, at most this many ("maker membership").
TOPIC_WORDS = 2

Kind = Literal["pronoun", "ellipsis", "alone"]


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

    @property
    def usages(self) -> list[Usage]:
        return [] if self.usage is None else [self.usage]

    @property
    def blocked(self) -> bool:
        return self.stage.status == "blocked"


def _meaningful(word: str) -> bool:
    return not (word in T.STOPWORDS or word in T.QUESTION_WORDS or word in PRONOUNS or len(word) < 2)


def topic(previous: str) -> str:
    """The previous question's subject: its first run of meaningful words ("How much is Maker membership per
    month?" -> "maker membership")."""
    run: list[str] = []
    for w in T.words(previous):
        if _meaningful(w):
            run.append(w)
            if len(run) == TOPIC_WORDS:
                break
        elif run:
            break
    return " ".join(run)


def kind_of(follow_up: str) -> Kind:
    """How the follow-up leans on the previous question: through a pronoun, by leaving its subject out
    (ellipsis, or too few words of its own to be a question), or not at all (a question of its own)."""
    said = T.words(follow_up)
    if any(w in PRONOUNS for w in said):
        return "pronoun"
    opening = " ".join(follow_up.lower().split())
    if opening.startswith(ELLIPSIS_OPENERS) or len([w for w in said if _meaningful(w)]) <= 1:
        return "ellipsis"
    return "alone"


_PRONOUN = re.compile(r"\b(it's|that's|its|it|they|them|their|this|that|these|those)\b", re.IGNORECASE)


def standalone(follow_up: str, previous: str) -> tuple[Kind, str]:
    """The local profile's standalone question: the follow-up with its first pronoun replaced by the previous
    question's topic; an elliptic follow-up after the previous question; a question of its own, itself."""
    kind = kind_of(follow_up)
    subject = topic(previous)
    if kind == "pronoun" and subject:

        def replace(m: re.Match[str]) -> str:
            word = m.group(1).lower()
            return f"{subject} is" if word.endswith("'s") else (f"{subject}'s" if word in ("its", "their") else subject)

        return kind, _PRONOUN.sub(replace, follow_up.strip(), count=1)
    if kind == "ellipsis" and previous:
        # "And for students?" after "How much is Maker membership?": "How much is Maker membership for
        # students?". The previous question's words stay, the follow-up's own come last.
        tail = follow_up.strip()
        lowered = tail.lower()
        for opener in ELLIPSIS_OPENERS:
            if lowered.startswith(opener):
                tail = tail[len(opener) :].lstrip()
                break
        return kind, f"{previous.strip().rstrip('?.!').rstrip()} {tail}"
    return kind, follow_up.strip()


_KINDS: dict[Kind, str] = {
    "pronoun": "a pronoun replaced by the previous question's topic",
    "ellipsis": "an elliptic follow-up read after the previous question",
    "alone": "a question of its own: searched and judged as asked",
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
    question: str, previous: Previous, condenser: Condenser | None, *, max_chars: int
) -> CondenseOutcome:
    timer = Timer()
    carried = list(previous.cited_passage_ids)
    if condenser is None:
        kind, alone = standalone(question, previous.standalone_question)
        # Searched as typed too: a rewrite by rule can miss, and the fused ranking keeps what the follow-up's
        # own words find.
        queries = [question, alone] if alone != question else [question]
        stage = CondenseStage(
            status="ok",
            ms=timer.ms,
            method="fused",
            detail=_KINDS[kind],
            standalone_question=alone,
            queries=queries,
            carried_passage_ids=carried,
        )
        own = sorted(T.content_terms(question) - T.content_terms(previous.standalone_question))
        return CondenseOutcome(stage, alone, queries, carried, own_terms=own if kind == "ellipsis" else [])
    # A failed call raises ModelError, which the pipeline answers as it answers any model's failure.
    condensed = await condenser.condense(question, previous.earlier)
    rewrite = " ".join(condensed.standalone.split())
    usage = condensed.usage
    bad = _bad_rewrite(rewrite, previous.standalone_question, max_chars)
    stage = CondenseStage(
        status="blocked" if bad else "ok",
        ms=timer.ms,
        detail=bad,
        method="model",
        model=condenser.name,
        standalone_question=None if bad else rewrite,
        queries=[] if bad else [rewrite],
        carried_passage_ids=carried,
        input_tokens=usage.input_tokens,
        output_tokens=usage.output_tokens,
    )
    return CondenseOutcome(stage, rewrite if not bad else question, [rewrite], carried, usage, bad)


def speaks_to(own_terms: Sequence[str], claims: Sequence[str]) -> bool:
    """Whether every claim holds one of an elliptic follow-up's own words: read after the previous question,
    "And the large one?" can be answered with the small one's price too, which holds none of them and answers
    the previous question again."""
    own = set(own_terms)
    return not own or all(T.content_terms(c) & own for c in claims)


def fuse(rankings: Sequence[Sequence[str]], k: int, rrf_k: int = 60) -> list[str]:
    """Reciprocal-rank fusion of several rankings of passage ids: the top `k`."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, pid in enumerate(ranking):
            scores[pid] = scores.get(pid, 0.0) + 1.0 / (rrf_k + rank + 1)
    return sorted(scores, key=lambda pid: -scores[pid])[:k]
