"""One request's run and the AskResponse built from it: each stage's record as it is set, the model usages the
stages carry (what the spend cap settles), and what a refused answer withholds.

A refused answer's text never leaves the server (pipeline.py): no record names a claim the generator wrote
itself, only a claim quoted word for word from a passage already on show.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Protocol

import msgspec

from provenance import text as T
from provenance.pipeline.corpora import CorpusRegistry
from provenance.pipeline.reasons import explain, headline_for
from provenance.ports import ScoredPassage, Usage
from provenance.wire import (
    AdmissionStage,
    AskResponse,
    Citation,
    ClaimResult,
    DecompositionStage,
    RateLimitStage,
    Reason,
    StageRecord,
    Stages,
    Status,
)

if TYPE_CHECKING:
    from provenance.conversations.service import Thread

# Told each stage's name (a `Stages` field) and record as the record is set; called in the pipeline's own
# task, so it must not block.
OnStage = Callable[[str, StageRecord], None]

NOT_COUNTED = "not counted: a cached answer costs no model call"
WITHHELD = "(withheld: a claim of the refused answer that the documents do not contain word for word)"
WITHHELD_DROPPED = "(withheld: a claim about the sources, dropped before checking)"
WITHHELD_NOT_IN_ANSWER = "(withheld: a claim the answer doesn't make, dropped before checking)"

# Each record type is the type of one `Stages` field, so a record says which stage it is.
_STAGE_OF: dict[type, str] = {f.type: f.name for f in msgspec.structs.fields(Stages)}


class Outcome(msgspec.Struct):
    response: AskResponse
    http_status: int = 200
    headers: dict[str, str] = msgspec.field(default_factory=dict)
    # The answer-cache entry a cached answer was served from (its key and when it was written), None for any
    # other: every hit of one entry is the same response but for what `Run.cached` sets, so the response log
    # encodes and hashes its body once per entry, not once per hit (feedback/responses.py).
    served_from: str | None = None


class StageOutcome(Protocol):
    """What a stage module returns: its record, and what its model calls cost."""

    @property
    def stage(self) -> StageRecord: ...

    @property
    def usages(self) -> Sequence[Usage]: ...


class Run:
    """The stages' records as they are set, and the usages of every model call made; `finish` builds the
    AskResponse from whatever stages ran."""

    def __init__(
        self,
        corpora: CorpusRegistry,
        profile: str,
        question: str,
        request_id: str,
        started: float,
        corpus: str,
        on_candidate: Callable[[str], None] | None = None,
        on_stage: OnStage | None = None,
        *,
        resolved: bool = True,
    ) -> None:
        """`resolved` is False for a request refused before its corpus was looked up (the bot check): the
        corpus is as the client asked ("" for none), and its version is not told."""
        self._corpora = corpora
        self.resolved = resolved
        self.profile = profile
        self.question = question
        self.request_id = request_id
        self.started = started
        self.corpus = corpus
        self.on_candidate = on_candidate
        self.on_stage = on_stage
        self.stages = Stages()
        self.usages: list[Usage] = []
        # A follow-up's (stages/condense.py): what is searched for and judged against, the queries fused,
        # and the previous turn's cited passages carried into the candidates.
        self.standalone: str | None = None
        self.queries: list[str] = []
        self.carried: list[ScoredPassage] = []
        self.own_terms: list[str] = []
        # A leaning follow-up's own words and the previous answer (stages/condense.py `repeats_previous`).
        self.asks: list[str] = []
        self.previous_answer: str | None = None
        # A model-condensed follow-up's rules' reading, judged when the answer to the rewrite doesn't answer it.
        self.second_reading: str | None = None
        # Whether the carried passages are ranked with the queries' results (a follow-up leaning on the last turn).
        self.rank_carried = False
        # This turn's conversation (pipeline._thread), and the answer cache's key once it is known.
        self.thread: Thread | None = None
        self.cache_key: str | None = None

    @property
    def follow_up(self) -> bool:
        return self.thread is not None and self.thread.follow_up

    @property
    def searched(self) -> str:
        """What retrieval searches for and relevance is judged against: the standalone question of a
        follow-up, else the question as asked."""
        return self.standalone or self.question

    def record(self, record: StageRecord, *, told: StageRecord | None = None) -> None:
        """Set a stage's record and tell `on_stage` (`told`, when what may be told before the gate decides is
        less than the record)."""
        name = _STAGE_OF[type(record)]
        setattr(self.stages, name, record)
        if self.on_stage is not None:
            self.on_stage(name, told or record)

    def take(self, outcome: StageOutcome, *, told: StageRecord | None = None) -> None:
        """A stage's outcome: its record, and its model calls' usages to settle."""
        self.record(outcome.stage, told=told)
        self.usages.extend(outcome.usages)

    def elapsed_ms(self) -> float:
        return round((time.perf_counter() - self.started) * 1000, 2)

    def cached(self, response: AskResponse, served_from: str | None) -> Outcome:
        """A cached answer under this request's id and timing, with the records of the stages it did meet;
        `served_from` names the entry it was decoded from (`Outcome.served_from`)."""
        cached = msgspec.structs.replace(response, request_id=self.request_id, cached=True, total_ms=self.elapsed_ms())
        cached.stages.cache = self.stages.cache
        cached.stages.bot_check = self.stages.bot_check
        cached.stages.rate_limit = RateLimitStage(detail=NOT_COUNTED)
        cached.stages.admission = AdmissionStage(detail="not needed: served from the cache")
        return Outcome(cached, served_from=served_from)

    def cached_follow_up(self, response: AskResponse) -> Outcome:
        """A follow-up's cached answer, found after condensing: the records of the stages this request did
        meet (its place in the hourly limit, its slot, its spend with the condense call, condensing itself)
        beside the cached answer's own, under the question as this request asked it."""
        cached = msgspec.structs.replace(
            response, request_id=self.request_id, question=self.question, cached=True, total_ms=self.elapsed_ms()
        )
        for name in ("bot_check", "cache", "rate_limit", "admission", "spend", "condense"):
            setattr(cached.stages, name, getattr(self.stages, name))
        return Outcome(cached)

    def rate_limited(self) -> Outcome:
        retry = str(self.stages.rate_limit.retry_after_s or 60)
        return self.finish("blocked", "rate_limited", http_status=429, headers={"Retry-After": retry})

    def finish(
        self,
        status: Status,
        reason: Reason | None,
        *,
        answer: str | None = None,
        citations: list[Citation] | None = None,
        http_status: int = 200,
        headers: dict[str, str] | None = None,
        detail: str | None = None,
    ) -> Outcome:
        stages = self.stages
        for name in Stages.__struct_fields__:
            stage = getattr(stages, name)
            if stage.status == "skipped" and stage.detail is None:
                stage.detail = _skip_reason(status, reason)
        response = AskResponse(
            request_id=self.request_id,
            question=self.question,
            status=status,
            reason=reason,
            answer=answer if status == "answered" else None,
            citations=citations or [] if status == "answered" else [],
            cached=False,
            profile=self.profile,
            total_ms=self.elapsed_ms(),
            stages=stages,
            headline=headline_for(reason, stages),
            message=explain(reason, stages, detail),
            corpus_version=self._corpora.of(self.corpus).version if self.resolved else None,
            corpus=self.corpus or None,
        )
        return Outcome(response, http_status, headers or {})


def _skip_reason(status: Status, reason: Reason | None) -> str:
    if status == "blocked":
        return f"skipped: the request was blocked ({reason})"
    if status == "refused":
        return f"skipped: the request was refused ({reason})"
    return "skipped"


def withhold_dropped(stage: DecompositionStage) -> DecompositionStage:
    """The claims the decomposition dropped are the model's words: not told before the gate decides, nor
    after a refusal."""
    return msgspec.structs.replace(
        stage,
        dropped=[WITHHELD_DROPPED] * len(stage.dropped),
        not_in_answer=[WITHHELD_NOT_IN_ANSWER] * len(stage.not_in_answer),
    )


def withhold_unquoted(claim: ClaimResult, passages: Sequence[ScoredPassage]) -> ClaimResult:
    """A refused answer's text must not leave the server. A claim quoted word for word from a retrieved
    passage is evidence already on show and stays readable; anything the generator wrote itself is withheld,
    keeping its scores."""
    if any(T.quoted_in(claim.text, p.text) for p in passages):
        return claim
    return msgspec.structs.replace(claim, text=WITHHELD)
