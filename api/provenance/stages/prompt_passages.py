"""The passages as a model call's prompt holds them: whole, or, past the profile's token budget
(`Profile.passage_tokens`), each cut to its sentences closest to the question (the judgment a refusal's
closest sentence comes from: `stages/closest.py`), best first across the passages, until the budget is
spent. Every passage keeps its id and at least its best sentence, so what the model cites is a passage it was
shown and the citations and support come out as before. Only the prompt is cut: every check (the local
verifier, the lexical check, the citations) reads the passages whole.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from provenance.inference.embedder import Embedder
from provenance.ports import ScoredPassage, SentenceScore, Verifier
from provenance.stages.closest import ranked, sentence_scores
from provenance.timing import Timer

# Where sentences left out of a cut passage were.
GAP = " … "


class PromptPassages(msgspec.Struct, frozen=True):
    """The passages a prompt holds, what the passages weighed whole and in the prompt (by our tokenizer),
    and the ids of those cut."""

    passages: list[ScoredPassage]
    budget: int
    tokens: int
    prompt_tokens: int
    cut: list[str]
    ms: float

    @property
    def detail(self) -> str | None:
        if not self.cut:
            return None
        return (
            f"{len(self.cut)} passage(s) cut to their sentences closest to the question for the prompt, to fit "
            f"its budget of {self.budget} tokens ({self.tokens} → {self.prompt_tokens}); every check read them whole"
        )


async def prompt_passages(
    question: str, passages: Sequence[ScoredPassage], budget: int, verifier: Verifier, embedder: Embedder
) -> PromptPassages:
    timer = Timer()
    whole = [embedder.count_tokens(p.text) for p in passages]
    if budget <= 0 or sum(whole) <= budget:
        return PromptPassages(list(passages), budget, sum(whole), sum(whole), [], timer.ms)
    relevance, similarity = await sentence_scores(question, passages, verifier, embedder)
    kept = _choose(passages, relevance, similarity, budget, embedder)
    out: list[ScoredPassage] = []
    cut: list[str] = []
    for i, passage in enumerate(passages):
        spans = [(s.start, s.end) for k, s in enumerate(similarity[i]) if k in kept[i]]
        if not spans or len(spans) == len(similarity[i]):
            out.append(passage)
            continue
        out.append(msgspec.structs.replace(passage, text=_joined(passage.text, spans, similarity[i]), sentences=()))
        cut.append(passage.id)
    tokens = sum(embedder.count_tokens(p.text) for p in out)
    return PromptPassages(out, budget, sum(whole), tokens, cut, timer.ms)


def _choose(
    passages: Sequence[ScoredPassage],
    relevance: list[list[SentenceScore]] | None,
    similarity: list[list[SentenceScore]],
    budget: int,
    embedder: Embedder,
) -> list[set[int]]:
    """Which sentences of each passage the prompt keeps: each passage's best, then the best left of any
    passage (a passage's next before a later passage's equal), while they fit."""
    order = [ranked(similarity[i], relevance[i] if relevance is not None else None) for i in range(len(passages))]
    cost = [
        [embedder.count_tokens(passages[i].text[s.start : s.end]) for s in similarity[i]] for i in range(len(passages))
    ]
    kept: list[set[int]] = [set() for _ in passages]
    used = 0
    for i, best in enumerate(order):
        if best:
            kept[i].add(best[0])
            used += cost[i][best[0]]
    # Round by round: every passage's second best, then every passage's third, so no passage is starved.
    for rank in range(1, max((len(o) for o in order), default=0)):
        for i, o in enumerate(order):
            if rank < len(o) and used + cost[i][o[rank]] <= budget:
                kept[i].add(o[rank])
                used += cost[i][o[rank]]
    return kept


def _joined(text: str, spans: Sequence[tuple[int, int]], sentences: Sequence[SentenceScore]) -> str:
    """The kept sentences in the passage's order: neighbours as the passage has them, a gap marked."""
    starts = [s.start for s in sentences]
    parts: list[str] = []
    previous: int | None = None
    for start, end in sorted(spans):
        index = starts.index(start)
        if parts and previous is not None and index == previous + 1:
            parts[-1] = parts[-1] + text[sentences[previous].end : start] + text[start:end]
        else:
            parts.append(text[start:end])
        previous = index
    return GAP.join(parts).strip()
