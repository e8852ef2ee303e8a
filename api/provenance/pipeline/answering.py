"""Stages 7-12 of /ask, for a request the pipeline (pipeline.py) has admitted and whose spend it has
reserved: screening with retrieval and the quarantine, generation, then the claims, entailment, the lexical
check and the gate, and the citations of a passed answer. Each stage's outcome goes to the run
(response.py) whole, its record and its usages. A refused answer's text is only logged at debug: the gate's
record is set once its claims are withheld, and the claims the decomposition dropped are never told.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Sequence

import msgspec

from provenance import text as T
from provenance.inference import streamed_calls
from provenance.inference.embedder import Embedder
from provenance.logs import get_logger
from provenance.pipeline.corpora import CorpusRegistry
from provenance.pipeline.run import Outcome, Run, withhold_dropped, withhold_unquoted
from provenance.ports import Profile, ScoredPassage
from provenance.settings import Settings
from provenance.stages.citations import citations_from_support
from provenance.stages.closest import closest_sentences, with_closest
from provenance.stages.condense import fuse, repeats_previous, speaks_to
from provenance.stages.decompose import decompose, decompose_and_verify
from provenance.stages.entail import entail
from provenance.stages.gate import gate
from provenance.stages.generate import GenerationOutcome, generate
from provenance.stages.lexical import lexical_check
from provenance.stages.prompt_passages import PromptPassages, prompt_passages
from provenance.stages.quarantine import QuarantineOutcome, quarantine
from provenance.stages.retrieve import RetrievalOutcome, passage_records, retrieve
from provenance.stages.screen import screen_classifier
from provenance.store.corpora import CorpusStore
from provenance.timing import Timer
from provenance.wire import ClaimResult

log = get_logger("provenance.pipeline.answering")


def _with_prompt(generated: GenerationOutcome, prompt: PromptPassages) -> GenerationOutcome:
    """The generation record, saying what the prompt held of the passages."""
    notes = [n for n in (generated.stage.detail, prompt.detail) if n]
    stage = msgspec.structs.replace(
        generated.stage,
        ms=round(generated.stage.ms + prompt.ms, 2),
        prompt_passage_tokens=prompt.prompt_tokens,
        cut_passage_ids=prompt.cut,
        detail="; ".join(notes) or None,
    )
    return msgspec.structs.replace(generated, stage=stage)


class Answering:
    """The stages that read the corpus and call the profile's models, in their order."""

    def __init__(
        self, settings: Settings, store: CorpusStore, embedder: Embedder, profile: Profile, corpora: CorpusRegistry
    ) -> None:
        self._settings = settings
        self._store = store
        self._embedder = embedder
        self._profile = profile
        self._corpora = corpora

    async def answer(self, run: Run) -> Outcome:
        """The answer, or the refusal or block that one of the stages decided. A model-condensed follow-up
        whose answer doesn't answer the rewrite is written and checked again, from the same passages, against
        the rules' reading of it (stages/condense.py `second_reading`); the condense record says so."""
        read = await self._screen_and_retrieve(run)
        if isinstance(read, Outcome):
            return read
        retrieved = run.stages.retrieval
        outcome = await self._written(run, read)
        second, rewrite = run.second_reading, run.searched
        if second is None or (outcome.response.status, outcome.response.reason) != ("refused", "not_an_answer"):
            return outcome
        run.standalone, run.second_reading = second, None
        # The passages as retrieved, without the refusal's closest sentences to the rewrite.
        run.stages.retrieval = retrieved
        note = f"the answer to the rewrite ({rewrite}) did not answer it: judged against the rules' reading"
        run.record(msgspec.structs.replace(run.stages.condense, standalone_question=second, detail=note))
        return await self._written(run, read)

    async def _written(self, run: Run, read: list[ScoredPassage]) -> Outcome:
        """8-12 for the question as it is read now (`run.searched`)."""
        # 8. Generation from the retrieved passages only, as the quarantine left them, in the prompt cut to the
        # profile's budget (every check below reads them whole).
        prompt = await prompt_passages(
            run.searched, read, self._profile.passage_tokens, self._profile.verifier, self._embedder
        )
        generated = await generate(run.searched, self._profile.generator, prompt.passages)
        run.take(_with_prompt(generated, prompt) if prompt.budget else generated)
        answer = generated.generation.answer
        if run.on_candidate is not None:
            run.on_candidate(answer)
        if not answer:
            s = run.stages
            for unchecked in (s.decomposition, s.entailment, s.lexical_check, s.gate):
                unchecked.detail = "skipped: the generator gave no answer"
            await self._closest(run, read)
            return run.finish("refused", "no_answer")
        return await self._verify(run, answer, read, prompt.passages)

    async def _screen_and_retrieve(self, run: Run) -> Outcome | list[ScoredPassage]:
        """7. Screening by the classifier (the deny-list ran before admission), with retrieval and then the
        quarantine of what the passages say to the model: the passages every later stage reads, or the
        answer when screening blocked the question. A screener that reads the passages (the local one weighs
        the question against what the quarantine left) waits for them; any other (a model call) runs
        alongside embedding and retrieval."""
        question = run.searched
        retrieval_task = asyncio.create_task(self._retrieve(run))
        screen_timer = Timer()
        try:
            if not self._profile.screener_reads_passages:
                screening = asyncio.create_task(screen_classifier(question, self._profile.screener, []))
                try:
                    retrieval: RetrievalOutcome = await retrieval_task
                    held = await self._held(run, retrieval)
                    screened = await screening
                finally:
                    if not screening.done():
                        screening.cancel()
            else:
                retrieval = await retrieval_task
                held = await self._held(run, retrieval)
                screened = await screen_classifier(question, self._profile.screener, held.passages)
                screened.stage.ms = round(max(0.0, screen_timer.ms - retrieval.stage.ms - held.stage.ms), 2)
        finally:
            if not retrieval_task.done():
                retrieval_task.cancel()
        run.take(screened)
        if screened.blocked:
            return run.finish("blocked", screened.stage.reason or "injection")
        return held.passages

    async def _retrieve(self, run: Run) -> RetrievalOutcome:
        """The top k for the question; a follow-up's fused queries ranked by RRF (stages/condense.py), with
        the previous turn's cited passages as one more ranking when the follow-up leans on that turn, and
        after them as candidates."""
        s = self._settings
        known = self._corpora.of(run.corpus)
        # A corpus too small to have been given the HNSW index on its own is ranked exactly.
        exact = 0 < known.passage_count < s.retrieval.hnsw_min_passages

        def one(query: str) -> Awaitable[RetrievalOutcome]:
            return retrieve(
                query,
                self._embedder,
                self._store,
                s.retrieval.k,
                s.retrieval.mode,
                known.embedding_model,
                corpus=run.corpus,
                exact=exact,
            )

        if len(run.queries) <= 1 and not run.carried:
            return await one(run.searched)
        found = await asyncio.gather(*(one(q) for q in run.queries or [run.searched]))
        by_id = {p.id: p for outcome in found for p in outcome.passages}
        rankings = [[p.id for p in o.passages] for o in found]
        if run.rank_carried and run.carried:
            # A follow-up that leans on the previous turn: what that answer cited is ranked as one more query's
            # result ("and for students?" is most often answered beside what it follows from).
            by_id.update({p.id: by_id.get(p.id, p) for p in run.carried})
            rankings.append([p.id for p in run.carried])
        ranked = [by_id[pid] for pid in fuse(rankings, s.retrieval.k)]
        added = [p for p in run.carried if p.id not in {r.id for r in ranked}]
        notes = [f"{len(found)} queries fused by rank"] if len(found) > 1 else []
        if run.rank_carried and run.carried:
            notes.append(f"{len(run.carried)} passage(s) the previous answer cited ranked with them")
        if added:
            notes.append(f"{len(added)} passage(s) the previous answer cited added")
        ranked += added
        stage = msgspec.structs.replace(
            found[0].stage,
            ms=round(max(o.stage.ms for o in found), 2),
            passages=passage_records(ranked),
            detail="; ".join(notes) or found[0].stage.detail,
        )
        return RetrievalOutcome(stage, ranked)

    async def _held(self, run: Run, retrieval: RetrievalOutcome) -> QuarantineOutcome:
        """The retrieved passages after the quarantine. The retrieval record shows them as every later stage
        reads them: what the quarantine held back is not put on show either."""
        await self._stored_sentences(run.corpus, retrieval.passages)
        held = quarantine(retrieval.passages)
        run.record(msgspec.structs.replace(retrieval.stage, passages=passage_records(held.passages)))
        run.take(held)
        return held

    async def _stored_sentences(self, corpus: str, passages: Sequence[ScoredPassage]) -> None:
        """Hand the profile the vectors ingest stored for the retrieved passages' sentences (one query), so
        the verifier embeds none of them: on the request path only the question, and what a generated
        answer words its own way, are embedded."""
        if self._profile.sentence_vectors is None or not passages:
            return
        texts = {p.id: p.text for p in passages}
        rows = await self._store.sentence_vectors(corpus, list(texts), T.SEGMENTER_VERSION, self._embedder.model_name)
        self._profile.sentence_vectors((texts[pid][start:end], vector) for pid, start, end, vector in rows)

    async def _verify(
        self, run: Run, answer: str, passages: Sequence[ScoredPassage], prompted: Sequence[ScoredPassage]
    ) -> Outcome:
        """9-12. Claims, entailment, the lexical sanity check and the gate; the answer with citations derived
        from the verified support, or the refusal with the answer withheld. The model's claims call is shown
        the passages as the answer's prompt held them (`prompted`); every other check reads them whole."""
        # Relevance is judged against the standalone question of a follow-up, which carries its own ask;
        # support only against this turn's passages, never an earlier answer.
        question, combined = run.searched, self._profile.decompose_and_verify
        if combined is not None:
            # One model call gives the claims and the model's verdicts; the local verifier still scores
            # every claim itself, and a claim is supported only when both agree.
            decomposed = await decompose_and_verify(question, answer, prompted, combined)
        else:
            assert self._profile.decomposer is not None  # a Profile has one or the other (Profile.__post_init__)
            decomposed = await decompose(question, answer, self._profile.decomposer)
        run.take(decomposed, told=withhold_dropped(decomposed.stage))
        # The claims are checked on this machine (and by the reading judge, when one is set): shown as it starts.
        streamed_calls.report("entailment", 0, 0.0)
        entailed = await entail(question, decomposed, passages, self._profile.verifier)
        run.take(entailed)
        checked = lexical_check(entailed.claims, passages, question)
        run.take(checked)
        verdict = gate(checked.claims, self._settings.gate)
        if verdict.decision == "pass" and (again := _answers_previous_again(run, checked.claims, passages)) is not None:
            verdict = msgspec.structs.replace(verdict, decision="fail", failed="relevance", detail=again)
        if verdict.decision != "pass":
            log.debug("refused answer", answer=answer, score=verdict.score)
            run.record(
                msgspec.structs.replace(verdict, claims=[withhold_unquoted(c, passages) for c in verdict.claims])
            )
            run.stages.decomposition = withhold_dropped(run.stages.decomposition)
            await self._closest(run, passages)
            return run.finish("refused", "not_an_answer" if verdict.failed == "relevance" else "not_grounded")
        run.record(verdict)
        citations = citations_from_support(checked.claims, passages, self._settings.gate.min_claim)
        return run.finish("answered", None, answer=answer, citations=citations)

    async def _closest(self, run: Run, passages: Sequence[ScoredPassage]) -> None:
        """A refusal shows, in each retrieved passage, the sentence closest to the question (stages/closest.py)."""
        closest = await closest_sentences(run.searched, passages, self._profile.verifier, self._embedder)
        retrieval = run.stages.retrieval
        run.stages.retrieval = msgspec.structs.replace(retrieval, passages=with_closest(retrieval.passages, closest))


def _answers_previous_again(run: Run, claims: Sequence[ClaimResult], passages: Sequence[ScoredPassage]) -> str | None:
    """Why a follow-up's answer answers the previous question again, or None. A claim of an elliptic follow-up's
    answer without any of its own words (stages/condense.py `speaks_to`; its passage's heading counts as its
    words: "and for students?" is answered by a concession rate under "Student and concession rates"); or an
    answer that says the previous answer again without the follow-up's own ask (`repeats_previous`)."""
    headings = {p.id: p.heading for p in passages}
    scoped = [" ".join([c.text, *(headings.get(pid, "") for pid in c.supporting_passage_ids)]) for c in claims]
    if not speaks_to(run.own_terms, scoped):
        return f"a claim does not speak to the follow-up's own words ({', '.join(run.own_terms)})"
    if repeats_previous(run.asks, run.previous_answer, [c.text for c in claims], " ".join(scoped)):
        return f"the answer only repeats the previous answer, without the follow-up's {', '.join(run.asks)}"
    return None
