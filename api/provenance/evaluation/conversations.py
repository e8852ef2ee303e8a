"""`provenance evals --conversations`: a conversation suite (evals/conversations.jsonl) through the same
pipeline /ask uses, in process, each conversation turn by turn under one conversationId; beside it, each
follow-up's hand-written standalone question asked alone (the ceiling).

Per follow-up (turn 2 on): answered correctly (an answer holding a reference string and none of the strings
it must not hold), fabrication (an answer where a refusal was right, or one holding a string it must not:
the previous answer given again, a wrong premise confirmed), and retrieval recall@k (a passage the suite
names as the answer's is among the top k searched). The same for the standalone questions.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Sequence
from pathlib import Path

import msgspec

from provenance.conversations.service import Conversations
from provenance.evaluation.runner import ingested_pipeline
from provenance.evaluation.scoring import answer_matches
from provenance.inference.embedder import Embedder
from provenance.pipeline.door import Pipeline
from provenance.ports import Profile
from provenance.report import ProgressBar, cell, pct, table
from provenance.settings import REPO_ROOT, Settings
from provenance.store.conversations import ConversationStore
from provenance.wire import AskResponse


class SuiteTurn(msgspec.Struct, frozen=True, rename="camel"):
    question: str
    standalone_question: str
    expect: str
    must_include_any: list[str] | None = None
    must_not_include: list[str] | None = None
    passages: list[str] = msgspec.field(default_factory=list)
    kinds: list[str] = msgspec.field(default_factory=list)
    trap: bool = False
    refusal_acceptable: bool = False
    note: str | None = None


class SuiteConversation(msgspec.Struct, frozen=True):
    id: str
    corpus: str
    turns: list[SuiteTurn]
    kinds: list[str] = msgspec.field(default_factory=list)
    note: str | None = None


class TurnResult(msgspec.Struct, rename="camel", kw_only=True):
    conversation: str
    turn: int
    kinds: list[str]
    expect: str
    question: str
    # What the pipeline searched: the condensed question for a follow-up, the hand-written one for the ceiling.
    searched: str
    status: str
    reason: str | None
    answer: str | None
    correct: bool
    fabricated: bool
    recall: bool | None
    ms: float
    condense_ms: float | None = None
    retrieval_ms: float | None = None


def load_suite(path: Path) -> list[SuiteConversation]:
    decoder = msgspec.json.Decoder(SuiteConversation)
    return [decoder.decode(line) for line in path.read_bytes().splitlines() if line.strip()]


def judge(turn: SuiteTurn, response: AskResponse, k: int) -> tuple[bool, bool, bool | None]:
    """(answered correctly, fabricated, recall@k) of one response to one turn."""
    answered = response.status == "answered"
    wrong = answered and bool(answer_matches(response.answer, turn.must_not_include))
    if turn.expect == "answer":
        right = answered and not wrong and bool(answer_matches(response.answer, turn.must_include_any))
        # A turn whose refusal the suite accepts is not wrong to refuse: counted right either way but a bad answer.
        if turn.refusal_acceptable and not answered:
            right = True
    else:
        right = not answered
    fabricated = wrong or (answered and turn.expect != "answer")
    searched = [p.id for p in response.stages.retrieval.passages[:k]]
    recall = None if not turn.passages or turn.expect != "answer" else any(p in searched for p in turn.passages)
    return right, fabricated, recall


def _result(c: SuiteConversation, n: int, turn: SuiteTurn, response: AskResponse, k: int) -> TurnResult:
    right, fabricated, recall = judge(turn, response, k)
    s = response.stages
    return TurnResult(
        conversation=c.id,
        turn=n,
        kinds=turn.kinds,
        expect=turn.expect,
        question=turn.question,
        searched=response.standalone_question or response.question,
        status=response.status,
        reason=response.reason,
        answer=response.answer,
        correct=right,
        fabricated=fabricated,
        recall=recall,
        ms=response.total_ms,
        condense_ms=s.condense.ms if s.condense.status != "skipped" else None,
        retrieval_ms=s.retrieval.ms if s.retrieval.status != "skipped" else None,
    )


async def run_conversations(
    pipeline: Pipeline, suite: Sequence[SuiteConversation], show_progress: bool = True
) -> tuple[list[TurnResult], list[TurnResult]]:
    """Every conversation turn by turn (a follow-up under its conversation's id), then each follow-up's
    standalone question asked alone. Both lists hold the follow-ups only (turn 2 on)."""
    k = pipeline.settings.retrieval.k
    followed: list[TurnResult] = []
    alone: list[TurnResult] = []
    progress = ProgressBar(sum(len(c.turns) * 2 - 1 for c in suite), "conversations") if show_progress else None
    try:
        for c in suite:
            conversation_id: str | None = None
            for n, turn in enumerate(c.turns, start=1):
                outcome = await pipeline.ask(
                    turn.question, request_id=f"conv-{c.id}-{n}", use_cache=False, conversation_id=conversation_id
                )
                conversation_id = outcome.response.conversation_id
                if n > 1:
                    followed.append(_result(c, n, turn, outcome.response, k))
                    ceiling = await pipeline.ask(
                        turn.standalone_question, request_id=f"alone-{c.id}-{n}", use_cache=False
                    )
                    alone.append(_result(c, n, turn, ceiling.response, k))
                    if progress:
                        progress.advance()
                if progress:
                    progress.advance()
    finally:
        if progress:
            progress.close()
    return followed, alone


class SuiteScore(msgspec.Struct):
    n: int
    answerable: int
    answered_correctly: float | None
    fabrication: float | None
    unanswerable_answered: int
    wrong_premise_confirmed: int
    recall: float | None


def _rate(num: int, den: int) -> float | None:
    return None if den == 0 else num / den


def score(results: Sequence[TurnResult]) -> SuiteScore:
    answerable = [r for r in results if r.expect == "answer"]
    keyed = [r for r in answerable if r.recall is not None]
    return SuiteScore(
        n=len(results),
        answerable=len(answerable),
        answered_correctly=_rate(sum(r.correct for r in answerable), len(answerable)),
        fabrication=_rate(sum(r.fabricated for r in results), len(results)),
        unanswerable_answered=sum(r.expect != "answer" and r.status == "answered" for r in results),
        wrong_premise_confirmed=sum("wrong-premise" in r.kinds and r.fabricated for r in results),
        recall=_rate(sum(bool(r.recall) for r in keyed), len(keyed)),
    )


def _p50(values: Sequence[float | None]) -> float | None:
    kept = [v for v in values if v is not None]
    return statistics.median(kept) if kept else None


def corpus_dir(name: str) -> Path:
    """A suite's corpus: `corpus` (ours) or a folder relative to the repository root."""
    return (REPO_ROOT / name).resolve()


def pipeline_with_conversations(pipeline: Pipeline) -> Pipeline:
    """The eval's pipeline with conversations kept in its own schema, under a key of its own."""
    pool = pipeline.store.pool

    async def secret(candidate: bytes) -> bytes:
        return candidate

    conversations = Conversations(pipeline.settings, ConversationStore(pool), secret)
    return Pipeline(
        pipeline.settings,
        pipeline.store,
        pipeline.embedder,
        pipeline.profile,
        pipeline.guards,
        corpora=pipeline.corpora,
        conversations=conversations,
    )


async def run_suite(
    settings: Settings, suite_path: Path, out: Path, embedder: Embedder, profile: Profile, show_progress: bool = True
) -> tuple[SuiteScore, SuiteScore]:
    started = time.monotonic()
    suite = load_suite(suite_path)
    followed: list[TurnResult] = []
    alone: list[TurnResult] = []
    for name in dict.fromkeys(c.corpus for c in suite):
        async with ingested_pipeline(settings, corpus_dir(name), embedder, profile) as plain:
            pipeline = pipeline_with_conversations(plain)
            f, a = await run_conversations(pipeline, [c for c in suite if c.corpus == name], show_progress)
            assert pipeline.conversations is not None
            await pipeline.conversations.log.aclose()
            followed += f
            alone += a
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(render(followed, alone, settings, profile.name, suite_path, time.monotonic() - started))
    out.with_suffix(".jsonl").write_bytes(
        b"".join(
            msgspec.json.encode({"run": run, **msgspec.to_builtins(r)}) + b"\n"
            for run, results in (("follow-up", followed), ("standalone", alone))
            for r in results
        )
    )
    return score(followed), score(alone)


def render(
    followed: Sequence[TurnResult],
    alone: Sequence[TurnResult],
    settings: Settings,
    profile: str,
    suite_path: Path,
    seconds: float,
) -> str:
    f = score(followed)
    lines = [
        f"# Conversations: {profile} profile",
        "",
        f"`provenance evals --conversations {suite_path.name}`:"
        f" {len({r.conversation for r in followed})} conversations,"
        f" {f.n} follow-ups ({f.answerable} answerable), each asked in its conversation and, as the ceiling, as its"
        f" hand-written standalone question alone. Gate threshold {settings.gate.threshold}, k={settings.retrieval.k},"
        f" retrieval {settings.retrieval.mode}. {seconds:.0f} s on a shared machine.",
        "",
        *table(
            ["follow-ups", "in conversation", "standalone (ceiling)", "ratio"],
            "lrrr",
            _summary_rows(f, score(alone), settings.retrieval.k),
        ),
        "",
        _timings(followed, alone),
        "",
        "## By kind",
        "",
        *table(
            ["kind", "n", "correct (conv.)", "correct (standalone)", "fabricated (conv.)", "fabricated (standalone)"],
            "lrrrrr",
            _kind_rows(followed, alone),
        ),
        "",
        "## Follow-ups not answered correctly, or fabricated",
        "",
        *table(["turn", "asked", "searched", "outcome"], "llll", _miss_rows(followed)),
        "",
    ]
    return "\n".join(lines)


def _ratio(x: float | None, y: float | None) -> str:
    return "n/a" if x is None or not y else f"{x / y:.2f}"


def _summary_rows(f: SuiteScore, a: SuiteScore, k: int) -> list[list[str]]:
    """The follow-ups in their conversation against their standalone questions, the ceiling."""
    return [
        [
            "answered correctly",
            pct(f.answered_correctly),
            pct(a.answered_correctly),
            _ratio(f.answered_correctly, a.answered_correctly),
        ],
        ["fabrication", pct(f.fabrication), pct(a.fabrication), ""],
        ["unanswerable answered", str(f.unanswerable_answered), str(a.unanswerable_answered), ""],
        ["wrong premise confirmed", str(f.wrong_premise_confirmed), str(a.wrong_premise_confirmed), ""],
        [f"retrieval recall@{k}", pct(f.recall), pct(a.recall), _ratio(f.recall, a.recall)],
    ]


def _kind_rows(followed: Sequence[TurnResult], alone: Sequence[TurnResult]) -> list[list[str]]:
    rows = []
    for kind in sorted({k for r in followed for k in r.kinds}):
        fk, ak = score([r for r in followed if kind in r.kinds]), score([r for r in alone if kind in r.kinds])
        rows.append(
            [
                kind,
                str(fk.n),
                pct(fk.answered_correctly),
                pct(ak.answered_correctly),
                pct(fk.fabrication),
                pct(ak.fabrication),
            ]
        )
    return rows


def _timings(followed: Sequence[TurnResult], alone: Sequence[TurnResult]) -> str:
    condense = _p50([r.condense_ms for r in followed])
    retrieval_f, retrieval_a = _p50([r.retrieval_ms for r in followed]), _p50([r.retrieval_ms for r in alone])
    if condense is None or retrieval_f is None or retrieval_a is None:
        return ""
    return (
        f"Condense stage p50 {condense:.2f} ms; retrieval p50 {retrieval_f:.1f} ms for the follow-ups (the fused"
        f" queries) against {retrieval_a:.1f} ms for the standalone questions."
    )


def _miss_rows(followed: Sequence[TurnResult]) -> list[list[str]]:
    return [
        [
            f"{r.conversation} t{r.turn}",
            cell(r.question),
            cell(r.searched),
            f"{r.status}{' (' + r.reason + ')' if r.reason else ''}{' FABRICATED' if r.fabricated else ''}",
        ]
        for r in followed
        if not r.correct or r.fabricated
    ]
