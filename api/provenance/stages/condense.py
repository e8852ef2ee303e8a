"""Condensing: a follow-up made into what is searched for and what relevance is judged against. Runs from a
conversation's second turn, before the follow-up's cache lookup (its key is this stage's result).

- A model profile's condenser rewrites the follow-up as a standalone question in one model call, from the
  earlier turns' questions and answered answers. The rewrite is screened as a question is (the deny-list
  here, the classifier with the rest of screening); a rewrite that is empty, too long, an attack, or only
  the previous question again (it dropped the follow-up's own ask) is blocked with that reason.
- The local profile has no model: it searches with the follow-up alone and with the follow-up joined to the
  previous question's topic (its meaningful words the follow-up lacks), and fuses the two rankings (RRF).
  The joined query is the standalone question: the follow-up's own ask first, so that relevance is judged
  against what was asked now and not against the previous question.
- In every profile the previous turn's cited passages join the candidates (`carried`): a short follow-up
  ("and for students?") keeps the evidence it follows from. They are candidates only: each turn's claims are
  checked against this turn's passages, never against an earlier answer.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from provenance import text as T
from provenance.ports import Condenser, Usage
from provenance.stages.screen import deny_list_match
from provenance.timing import Timer
from provenance.wire import CondenseStage

# The previous question's words carried into the joined query, most of them: enough to name its topic.
TOPIC_WORDS = 8


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

    @property
    def usages(self) -> list[Usage]:
        return [] if self.usage is None else [self.usage]

    @property
    def blocked(self) -> bool:
        return self.stage.status == "blocked"


def topic(previous: str, follow_up: str) -> list[str]:
    """The previous question's meaningful words that the follow-up doesn't have, in their order."""
    have = T.content_terms(follow_up)
    seen: set[str] = set()
    out: list[str] = []
    for w in T.words(previous):
        if w in T.STOPWORDS or w in T.QUESTION_WORDS or (len(w) < 2 and not w.isdigit()):
            continue
        s = T.stem(w)
        if s in have or s in seen:
            continue
        seen.add(s)
        out.append(w)
    return out[:TOPIC_WORDS]


def joined_query(follow_up: str, previous: str) -> str:
    words = topic(previous, follow_up)
    return f"{follow_up.rstrip()} ({' '.join(words)})" if words else follow_up


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
        joined = joined_query(question, previous.standalone_question)
        queries = [question, joined] if joined != question else [question]
        stage = CondenseStage(
            status="ok",
            ms=timer.ms,
            method="fused",
            standalone_question=joined,
            queries=queries,
            carried_passage_ids=carried,
        )
        return CondenseOutcome(stage, joined, queries, carried)
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


def fuse(rankings: Sequence[Sequence[str]], k: int, rrf_k: int = 60) -> list[str]:
    """Reciprocal-rank fusion of several rankings of passage ids: the top `k`."""
    scores: dict[str, float] = {}
    for ranking in rankings:
        for rank, pid in enumerate(ranking):
            scores[pid] = scores.get(pid, 0.0) + 1.0 / (rrf_k + rank + 1)
    return sorted(scores, key=lambda pid: -scores[pid])[:k]
