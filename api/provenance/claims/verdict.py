"""Whose verdict on a claim wins: the one module that says so.

Three can have a say on a claim's support and relevance: the local verifier (features or trained, over the
rule checks), the reading judge (`JUDGE`, `claims.judge`), and the generator's own verdicts when a model
gave them with its claims. `combine` decides, for every claim:
- with a judge, the judge's verdicts under the rules' final vetoes (`JudgedVerifier`, below) are the claim's
  support and relevance; the generator's own and the local verifier's are recorded beside them and do not
  count (the generator never grades itself);
- without one, support is the less convinced of the local verifier and the generator (support is never the
  model's alone), and relevance is the generator's verdict when it gave one (relevance needs reading), else
  the local verifier's.

The judge on top of the local verifier (`JudgedVerifier`): the local verifier still judges every claim
first. Its per-passage scores rank the passages the judge reads (best first, at most `candidates`); in
each, the judge reads the window of one or two sentences the rules found the claim in, under the passage's
heading path; and the rules' vetoes cap whatever the judge says:
- `fact_not_stated`: a number, amount, date, time, email address or name in the claim that the passage does
  not state with the claim's other facts;
- `negation_flipped`: the passage's rule, reversed.
`not_self_contained` ("It costs $10 per week...") is the judge's call: it reads the claim against the
passage and can tell whether the passage says it. The lexical stage's caps (low overlap, the question's
dates and numbers, the answer type, the premise) apply after this, whoever judged.

A claim quoted word for word is what its passage says: support 1.0, with no judgment needed. Support is
judged without the question; relevance from the question, the claim and the heading path of the passage the
claim rests on. A claim whose support fails the gate's floor is not asked about relevance: the gate refuses
it for support whatever it would say.

Relevance is the judge's verdict (`JUDGE_RELEVANCE=judge`), or with `veto` the higher of the judge's and the
local verifier's unless the judge says No: Qwen2.5-Coder-1.5B's P(Yes) sits at 0.5-0.7 for plain right
answers ("A replacement keyfob costs $15." for "How much is a replacement?": 0.65), under the gate's 0.70,
while the local verifier reads those well on its own corpus and misses near misses the judge refuses.
"""

from __future__ import annotations

from collections.abc import Sequence

import msgspec

from provenance.claims.judge.model import MAX_CLAIMS_JUDGED, Judged, ReadingJudge
from provenance.claims.rules import supporting
from provenance.claims.support import FACT_VETO, NEGATION_VETO, QUOTED_SUPPORT
from provenance.ports import (
    MISSING_VERDICT,
    ClaimVerdict,
    PassageSupport,
    RanksSentences,
    ScoredPassage,
    SentenceScore,
    Usage,
    Verification,
    Verifier,
)
from provenance.settings import JudgeRelevance
from provenance.wire import ClaimResult, EvidenceSpan, JudgeRecord, JudgeRelation

# The vetoes a judge can't overrule, and the cap each puts on its verdict.
FINAL_VETOES = {"fact_not_stated": FACT_VETO, "negation_flipped": NEGATION_VETO}
# Past this calibrated support the next candidate passage is not read: the claim rests on this one.
ENOUGH = 0.9
# Below this support the gate refuses the claim whatever its relevance (GATE_MIN_CLAIM's default).
SUPPORT_FLOOR = 0.40
# The judge's own verdict: Yes is the likelier answer.
SAYS_YES = 0.5
# A firm No on relevance (JUDGE_RELEVANCE=firm): Qwen2.5-Coder-1.5B's P(Yes) for every right answer of
# HaluEval's 95 QA pairs is above it (the lowest 0.23; evals/judge/*-relevance.jsonl), and 4 of its 65
# non-answers are at or below. Fitted there only; the 18F relevance pairs report it.
FIRM_NO = 0.2


def no_no(mode: str, p_yes: float) -> bool:
    """Whether the judge's relevance P(Yes) lets a higher verdict stand above its own, by JUDGE_RELEVANCE:
    `veto` unless it says No, `firm` unless it says a firm No, `judge` never."""
    if mode == "veto":
        return p_yes >= SAYS_YES
    if mode == "firm":
        return p_yes > FIRM_NO
    return False


class JudgedVerifier:
    def __init__(
        self,
        local: Verifier,
        judge: ReadingJudge,
        *,
        independent: bool,
        relevance: JudgeRelevance = "judge",
        relation: JudgeRelation = "independent",
    ) -> None:
        self.local = local
        self.judge = judge
        self.independent = independent
        self.relation = relation
        self.relevance = relevance
        self.name = f"judge:{judge.model}"

    async def verify(self, question: str, claims: Sequence[str], passages: Sequence[ScoredPassage]) -> Verification:
        if not claims:
            return Verification(verdicts=[])
        own = await self.local.verify(question, claims, passages)
        by_id = {p.id: p for p in passages}
        usages: list[Usage] = []
        supports = await self._support_all(claims, own.verdicts, by_id, usages)
        verdicts = []
        for i, (claim, local_verdict, judged) in enumerate(zip(claims, own.verdicts, supports, strict=True)):
            if i >= MAX_CLAIMS_JUDGED:
                # Past the bound the spend cap reserved for: not judged, so not supported (fail closed).
                verdicts.append(MISSING_VERDICT)
                continue
            verdicts.append(await self._verdict(question, claim, local_verdict, judged, by_id, usages))
        return Verification(verdicts=verdicts, usage=_total(self.judge.model, usages))

    async def _support_all(
        self,
        claims: Sequence[str],
        local: Sequence[ClaimVerdict],
        by_id: dict[str, ScoredPassage],
        usages: list[Usage],
    ) -> list[list[tuple[PassageSupport, Judged | None]]]:
        """Each claim's candidate passages with the judge's verdict on each (None: quoted, or not read). The
        judgments go passage by passage, so that the server's prompt cache holds a passage for every claim
        read against it: first every claim's best candidate, then the second for those that still need it."""
        out: list[list[tuple[PassageSupport, Judged | None]]] = [[] for _ in claims]
        queues = [[c for c in v.passages if c.passage_id in by_id][: self.judge.candidates] for v in local]
        del queues[MAX_CLAIMS_JUDGED:]
        for rank in range(self.judge.candidates):
            todo = [(i, q[rank]) for i, q in enumerate(queues) if rank < len(q) and not _settled(out[i], self.judge)]
            for i, candidate in sorted(todo, key=lambda t: t[1].passage_id):
                if candidate.quoted:
                    out[i].append((candidate, None))
                    continue
                judged = await self.judge.support(claims[i], window_of(by_id[candidate.passage_id], candidate))
                usages.append(judged.usage)
                out[i].append((candidate, judged))
        return out

    async def _verdict(
        self,
        question: str,
        claim: str,
        local: ClaimVerdict,
        judged: list[tuple[PassageSupport, Judged | None]],
        by_id: dict[str, ScoredPassage],
        usages: list[Usage],
    ) -> ClaimVerdict:
        if not judged:
            return MISSING_VERDICT
        scored = [(candidate, j, _capped(candidate, j, self.judge)) for candidate, j in judged]
        chosen = supporting([msgspec.structs.replace(c, score=score) for c, _, score in scored])
        best_candidate, best_judged, best = next(s for s in scored if s[0].passage_id == chosen[0].passage_id)
        ids = [s.passage_id for s in chosen]
        method = best_judged.method if best_judged is not None else ("json" if self.judge.json_only else "logprobs")
        record = JudgeRecord(
            model=self.judge.model,
            independent=self.independent,
            relation=self.relation,
            method=method,
            calibrated=self.judge.calibration is not None,
            support=round(best, 4),
            raw_support=None if best_judged is None else round(best_judged.p_yes, 4),
            passage_id=best_candidate.passage_id,
            judgments=sum(1 for _, j in judged if j is not None),
            detail="quoted word for word: stated, no judgment needed" if best_judged is None else None,
        )
        relevance: float = 0.0
        raise_ok = False
        if best >= SUPPORT_FLOOR:
            answered = await self.judge.relevance(question, claim, by_id[best_candidate.passage_id].heading)
            usages.append(answered.usage)
            relevance = self.judge.calibrated_relevance(answered.p_yes)
            # The record keeps the judge's own verdict (what the page says it said); the claim, what counts.
            record = _with_relevance(record, answered, relevance)
            may_raise = no_no(self.relevance, answered.p_yes)
            if may_raise and local.relevance is not None:
                # No No from the judge (with `firm`, no firm No): the local verifier's relevance may stand higher
                # than its timid P(Yes), and with `firm` so may the writer's own verdict (`combine`).
                relevance = max(relevance, local.relevance)
            raise_ok = self.relevance == "firm" and may_raise
        else:
            record = _with_detail(record, "relevance not judged: the support fails the gate's floor")
        veto = best_candidate.veto if best_candidate.veto in FINAL_VETOES else None
        return ClaimVerdict(
            support=round(best, 4),
            supporting_passage_ids=ids,
            relevance=round(relevance, 4),
            quoted=best_candidate.quoted,
            evidence=[
                EvidenceSpan(passage_id=c.passage_id, start=c.start, end=c.end)
                for c, _, _ in sorted(scored, key=lambda s: -s[2])
                if c.passage_id in ids and c.end > c.start
            ],
            veto=veto,
            passages=local.passages,
            judge=record,
            local_support=local.support,
            local_relevance=local.relevance,
            writer_may_raise=raise_ok,
        )

    async def sentence_relevance(self, question: str, passages: Sequence[ScoredPassage]) -> list[list[SentenceScore]]:
        """What a refusal shows as the sentence closest to the question: the local verifier's ranking (one
        judgment per sentence of every passage would cost more than the answer did)."""
        if isinstance(self.local, RanksSentences):
            return await self.local.sentence_relevance(question, passages)
        return [[] for _ in passages]


def window_of(passage: ScoredPassage, candidate: PassageSupport) -> ScoredPassage:
    """The passage cut to the window of one or two sentences the rules read the claim against, under its
    heading path: what the judge reads. Measured on evals/support-pairs.jsonl, Qwen2.5-Coder-1.5B's P(Yes)
    separates restatements from changed claims with ROC AUC 0.96 against the sentence and 0.76 against the
    whole passage: the more sentences around it, the more a changed claim finds something to agree with."""
    if candidate.end <= candidate.start:
        return passage
    return msgspec.structs.replace(passage, text=passage.text[candidate.start : candidate.end])


def _settled(judged: list[tuple[PassageSupport, Judged | None]], judge: ReadingJudge) -> bool:
    return any(_capped(c, j, judge) >= ENOUGH for c, j in judged)


def _capped(candidate: PassageSupport, judged: Judged | None, judge: ReadingJudge) -> float:
    """The judge's calibrated support under the rules' final vetoes; a quoted claim is stated."""
    if judged is None:
        return QUOTED_SUPPORT
    score = judge.calibrated(judged.p_yes)
    cap = FINAL_VETOES.get(candidate.veto or "")
    return score if cap is None else min(score, cap)


def _with_relevance(record: JudgeRecord, answered: Judged, relevance: float) -> JudgeRecord:
    return msgspec.structs.replace(
        record, relevance=round(relevance, 4), raw_relevance=round(answered.p_yes, 4), method=answered.method
    )


def _with_detail(record: JudgeRecord, detail: str) -> JudgeRecord:
    return msgspec.structs.replace(record, detail=detail)


def _total(model: str, usages: Sequence[Usage]) -> Usage | None:
    if not usages:
        return None
    return Usage(
        model=model,
        input_tokens=sum(u.input_tokens for u in usages),
        output_tokens=sum(u.output_tokens for u in usages),
    )


def combine(claims: Sequence[str], local: Verification, model: Verification | None) -> list[ClaimResult]:
    """Each claim's result from the local verifier's verdicts (`local`, the judge's when one judged) and the
    generator's own (`model`, None when it gave none)."""
    results = []
    for i, claim in enumerate(claims):
        lv = local.verdicts[i]
        mv: ClaimVerdict | None = None
        if model is not None and (model.local_only_from is None or i < model.local_only_from):
            mv = model.verdicts[i] if i < len(model.verdicts) else MISSING_VERDICT
        if mv is None or lv.judge is not None:
            support, ids = lv.support, list(lv.supporting_passage_ids)
        else:
            support = min(lv.support, mv.support)
            agreed = [pid for pid in lv.supporting_passage_ids if pid in mv.supporting_passage_ids]
            # Both must agree; when they name different passages, trust the more doubtful verifier's.
            ids = agreed or list((lv if lv.support <= mv.support else mv).supporting_passage_ids)
        relevance_from = mv if mv is not None and mv.relevance is not None and lv.judge is None else lv
        relevance = relevance_from.relevance or 0.0
        if lv.writer_may_raise and mv is not None and mv.relevance is not None:
            # JUDGE_RELEVANCE=firm and no firm No from the judge: the writer read the question too.
            relevance = max(relevance, mv.relevance)
        results.append(
            ClaimResult(
                text=claim,
                support=round(support, 4),
                relevance=round(relevance, 4),
                supporting_passage_ids=ids,
                lexical_overlap=0.0,
                local_support=round(lv.support if lv.local_support is None else lv.local_support, 4),
                local_relevance=_rounded(lv.relevance if lv.judge is None else lv.local_relevance),
                model_support=None if mv is None else round(mv.support, 4),
                model_relevance=None if mv is None or mv.relevance is None else round(mv.relevance, 4),
                quoted=lv.quoted,
                # The local support check's windows in the passages the claim finally rests on.
                evidence=[e for e in lv.evidence if e.passage_id in ids],
                veto=lv.veto,
                judge=lv.judge,
            )
        )
    return results


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 4)
