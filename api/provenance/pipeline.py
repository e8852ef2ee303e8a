"""The one place that orders the stages of /ask.

bot check -> cache -> rate limit -> deny-list -> admission -> spend cap -> screening -> retrieval ->
quarantine -> generation -> decomposition -> entailment -> lexical check -> gate -> citations. Every stage
leaves its record in `Stages`; a stage that did not run says so and why, and a caller that passes `on_stage` is
told each record as it is set (the streamed /ask). A refused answer's text never leaves this module (debug
log only), except to an in-process caller that asks for it by `on_candidate` (the eval harness, whose
threshold sweep scores it): no stage record holds it, and the gate's is told only once its claims are withheld.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence

import msgspec

from provenance import text as T
from provenance.admission import Admission
from provenance.corpora import UNKNOWN_CORPUS, KnownCorpus, default_of
from provenance.embedder import Embedder, one_request
from provenance.errors import JudgeError, ModelError, UnknownCorpus
from provenance.guards.base import Guards, NoGuards, RateLimitResult
from provenance.logs import get_logger
from provenance.models import (
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
from provenance.observe import AskObserver, NoObserver
from provenance.passages import ScoredPassage
from provenance.ports import Profile, Usage, Verification
from provenance.reasons import explain, headline_for
from provenance.settings import Settings
from provenance.stages.citations import citations_from_support
from provenance.stages.closest import closest_sentences, with_closest
from provenance.stages.decompose import decompose, decompose_and_verify
from provenance.stages.entail import entail
from provenance.stages.gate import gate
from provenance.stages.generate import generate
from provenance.stages.lexical import lexical_check
from provenance.stages.quarantine import QuarantineOutcome, quarantine
from provenance.stages.retrieve import RetrievalOutcome, passage_records, retrieve
from provenance.stages.screen import screen_classifier, screen_deny_list
from provenance.store import CorpusStore
from provenance.timing import Timer

log = get_logger("provenance.pipeline")

CORPUS_CHECK_EVERY_S = 5.0
# Enough passages to learn the vocabulary of any handbook-sized corpus without loading a huge one whole.
CORPUS_VOCABULARY_PASSAGES = 20_000
# The most stored word vectors read at start-up: the verifier's word cache holds 50,000.
STORED_WORDS_READ = 50_000

# Told each stage's name (a `Stages` field) and record as the record is set; called in the pipeline's own
# task, so it must not block.
OnStage = Callable[[str, StageRecord], None]


class Outcome(msgspec.Struct):
    response: AskResponse
    http_status: int = 200
    headers: dict[str, str] = msgspec.field(default_factory=dict)


class Pipeline:
    """Settings, profile and guards are fixed at construction (read-only below): a run that needs others
    builds a pipeline with them (`with_settings`, or the guards given to `services.build_services`)."""

    def __init__(
        self,
        settings: Settings,
        store: CorpusStore,
        embedder: Embedder,
        profile: Profile,
        guards: Guards | None = None,
        observer: AskObserver | None = None,
    ) -> None:
        self._settings = settings
        self.store = store
        self.embedder = embedder
        self._profile = profile
        self._guards: Guards = guards or NoGuards()
        self._observer: AskObserver = observer or NoObserver()
        self.admission = Admission(
            settings.server.ask_concurrency,
            settings.server.ask_queue_max,
            settings.server.ask_queue_timeout_s,
            on_change=self._observer.admission,
        )
        # corpus name -> its embedding model and version, as of the last look at the database
        self.corpora: dict[str, KnownCorpus] = {}
        self.corpus_check_every_s = CORPUS_CHECK_EVERY_S
        self._corpus_checked = time.monotonic()
        # The corpora's versions when the profile last learnt their vocabulary.
        self._vocabulary_of: dict[str, str] | None = None

    @property
    def settings(self) -> Settings:
        return self._settings

    @property
    def profile(self) -> Profile:
        return self._profile

    @property
    def guards(self) -> Guards:
        return self._guards

    def with_settings(self, settings: Settings) -> Pipeline:
        """The same store, embedder, profile and guards under other settings (the eval's k sweep), knowing the
        corpora this one knows: the profile has already learnt their vocabulary, so nothing is reloaded."""
        other = Pipeline(settings, self.store, self.embedder, self._profile, self._guards, self._observer)
        other.corpora = dict(self.corpora)
        other.corpus_check_every_s = self.corpus_check_every_s
        other._corpus_checked = self._corpus_checked
        other._vocabulary_of = self._vocabulary_of
        return other

    async def notice_new_corpus(self) -> None:
        """A `provenance ingest` run elsewhere changes the corpus under a running server: look (one small
        query, at most every few seconds) and pick up the new version, so cache keys and the verifier's
        vocabulary follow it without a restart."""
        now = time.monotonic()
        if now - self._corpus_checked < self.corpus_check_every_s:
            return
        self._corpus_checked = now
        if await self.store.corpus_versions() != {name: c.version for name, c in self.corpora.items()}:
            await self.refresh_corpus()

    async def refresh_corpus(self) -> None:
        self._corpus_checked = time.monotonic()
        corpora = await self.store.corpora()
        versions = {c.name: c.version for c in corpora}
        # The profile learns the corpora's vocabulary only when they changed, not on every fresh look (a
        # question naming a corpus that doesn't exist takes one).
        if versions != self._vocabulary_of:
            if self.profile.word_vectors is not None:
                # Stored at ingest: the vocabulary's vectors are read, not embedded again at every start.
                words = await self.store.word_vectors(self.embedder.model_name, STORED_WORDS_READ)
                self.profile.word_vectors(words)
            if self.profile.on_corpus is not None:
                texts = await self.store.passage_texts(CORPUS_VOCABULARY_PASSAGES, T.SEGMENTER_VERSION)
                await asyncio.to_thread(self.profile.on_corpus, texts)
            self._vocabulary_of = versions
        self.corpora = {c.name: KnownCorpus(c.embedding_model, c.version) for c in corpora}

    @property
    def default_corpus(self) -> str:
        return default_of(self.corpora)

    @property
    def corpus_model(self) -> str | None:
        return self.corpora.get(self.default_corpus, UNKNOWN_CORPUS).embedding_model

    @property
    def corpus_version(self) -> str | None:
        return self.corpora.get(self.default_corpus, UNKNOWN_CORPUS).version

    async def resolve_corpus(self, name: str | None) -> str:
        """The corpus a question is for; an unknown name is the client's error (404), after one fresh look in
        case it was ingested since the last."""
        if name is None:
            return self.default_corpus
        if name not in self.corpora:
            await self.refresh_corpus()
            if name not in self.corpora:
                raise UnknownCorpus(name, sorted(self.corpora))
        return name

    def answer_cache_key(self, question: str, corpus: str) -> str:
        version = self.corpora.get(corpus, UNKNOWN_CORPUS).version
        return self.guards.cache_key(question, f"{corpus}@{version or '-'}", self.settings_fingerprint())

    def settings_fingerprint(self) -> str:
        s = self.settings
        return (
            f"{self.profile.name}|{self.profile.cache_tag}|{s.embedding.model}|"
            f"{s.retrieval.k}|{s.retrieval.mode}|{s.gate.threshold}|{s.gate.min_claim}|"
            f"{s.gate.relevance}|{s.gate.relevance_uncertain}"
        )

    async def ask(
        self,
        question: str,
        *,
        request_id: str,
        turnstile_token: str | None = None,
        peer_ip: str | None = None,
        headers: Mapping[str, str] | None = None,
        use_cache: bool = True,
        corpus: str | None = None,
        on_candidate: Callable[[str], None] | None = None,
        on_stage: OnStage | None = None,
    ) -> Outcome:
        """`on_candidate`, for in-process callers only, is told the generated answer (empty when the generator
        found none) before it is checked, so also the answer of a request that ends refused. `on_stage` is told
        each stage's record as it is set (a stage that runs twice, the rate limit or the spend cap, twice);
        the admission record means a pipeline slot is held."""
        started = time.perf_counter()
        await self.notice_new_corpus()
        corpus = await self.resolve_corpus(corpus)
        run = _Run(self, question, request_id, Stages(), started, corpus, on_candidate, on_stage)
        admitted = await self._at_the_door(run, turnstile_token, peer_ip, headers or {}, use_cache)
        outcome = admitted if isinstance(admitted, Outcome) else await self._charged(run, admitted, use_cache)
        # Counted here, where every answer passes (cached, blocked at the door, or the whole run; streamed or
        # not): by what happened, not by the HTTP status it leaves with.
        self._observer.outcome(outcome.response)
        return outcome

    async def _at_the_door(
        self,
        run: _Run,
        turnstile_token: str | None,
        peer_ip: str | None,
        headers: Mapping[str, str],
        use_cache: bool,
    ) -> Outcome | _Entry:
        """The checks a request meets before any work: the bot check, the cache and a look at the rate limit.
        The answer when one of them settles the request, else what the rest of the run needs."""
        stages = run.stages
        # 1. Bot check: Turnstile for browsers, an API key for other apps. Turnstile is told the client's
        # address (behind our proxies, not the proxy's), so resolve it once here.
        client_ip = self.guards.client_ip(peer_ip, headers)
        bot = await self.guards.bot_check(turnstile_token, headers.get("authorization"), client_ip)
        run.record("bot_check", bot.stage)
        if bot.stage.status == "blocked":
            if bot.unauthorized:
                # A bad bearer key is a failed authentication, not a forbidden request (RFC 6750 §3).
                challenge = {"WWW-Authenticate": 'Bearer error="invalid_token"'}
                return run.finish("blocked", "invalid_api_key", http_status=401, headers=challenge)
            return run.finish("blocked", "bot_check_failed")

        # 2. Cache, before the rate limit: a cached answer is one indexed read and no model call, so it is
        # not counted against the hourly limit, and a client that has used its quota up still gets it.
        cache_key = self.answer_cache_key(run.question, run.corpus)
        if use_cache:
            cached = await self._cached(run, cache_key)
            if cached is not None:
                return cached
        else:
            stages.cache.detail = "cache bypassed for this run"

        # 3. Rate limit, per API key when one was presented, else per client IP: a look first, so a client
        # over its limit is turned away at once; the request takes its place only when it is about to be
        # worked on (below), so one that waited and was turned away as overloaded never held a place.
        client_key = bot.client_key or client_ip
        look = await self.guards.rate_limit(client_key, count=False)
        run.record("rate_limit", look.stage)
        if look.stage.status == "blocked":
            return _rate_limited(run)
        return _Entry(cache_key=cache_key, client_key=client_key)

    async def _cached(self, run: _Run, cache_key: str) -> Outcome | None:
        hit = await self.guards.cache_get(cache_key)
        run.record("cache", hit.stage)
        if hit.response is None:
            return None
        cached = msgspec.structs.replace(
            hit.response,
            request_id=run.request_id,
            cached=True,
            total_ms=round((time.perf_counter() - run.started) * 1000, 2),
        )
        cached.stages.cache = hit.stage
        cached.stages.bot_check = run.stages.bot_check
        cached.stages.rate_limit = RateLimitStage(detail=NOT_COUNTED)
        cached.stages.admission = AdmissionStage(detail="not needed: served from the cache")
        return Outcome(cached)

    async def _charged(self, run: _Run, entry: _Entry, use_cache: bool) -> Outcome:
        """The rest of the run, paid for from the client's hourly quota: when the answer fails on our side
        (database, model, budget), the request is given back."""
        counted: list[RateLimitResult] = []
        try:
            outcome = await self._admitted(run, entry.cache_key, use_cache, entry.client_key, counted)
        except Exception:
            for charge in counted:
                await self.guards.rate_limit_refund(charge)
            raise
        if outcome.response.reason in REFUNDED:
            for charge in counted:
                await self.guards.rate_limit_refund(charge)
        return outcome

    async def _count(self, run: _Run, client_key: str, counted: list[RateLimitResult]) -> Outcome | None:
        """Take this request's place in the client's hourly limit; the 429 when another took the last one."""
        limit = await self.guards.rate_limit(client_key)
        run.record("rate_limit", limit.stage)
        if limit.stage.status == "blocked":
            return _rate_limited(run)
        counted.append(limit)
        return None

    async def _admitted(
        self, run: _Run, cache_key: str, use_cache: bool, client_key: str, counted: list[RateLimitResult]
    ) -> Outcome:
        # 4. The deny-list: free, so it never waits for a pipeline slot; still counted, so that a flood of
        # injection attempts is limited like any other.
        denied = screen_deny_list(run.question)
        if denied is not None:
            run.record("screening", denied.stage)
            return await self._count(run, client_key, counted) or run.finish("blocked", "injection")

        # 5. A pipeline slot (api/provenance/admission.py): past the queue's bound or deadline this raises Overloaded.
        waiting = self.admission.waiting
        async with self.admission.slot() as waited_s:
            run.record(
                "admission",
                AdmissionStage(
                    status="ok", ms=round(waited_s * 1000, 2), running=self.admission.running, waiting=waiting
                ),
            )
            limited = await self._count(run, client_key, counted)
            if limited is not None:
                return limited
            # 6. Spend cap: reserve the worst-case cost before any paid call.
            reservation = await self.guards.spend_reserve(self.profile)
            run.record("spend", reservation.stage)
            if reservation.stage.status == "blocked":
                return run.finish("blocked", "budget_exhausted")

            usages: list[Usage] = []
            try:
                # Every stage that embeds the question (screening, retrieval, generator, verifier) shares one
                # embedding of it.
                with one_request():
                    outcome = await self._answer(run, usages)
            except ModelError as exc:
                log.warning("model error", error=str(exc))
                self._observer.model_error(exc)
                # A call that was billed but gave unusable output (ModelOutputError) still costs its usage.
                billed = exc.usage
                if billed is not None:
                    usages.append(billed)
                # The judge failing is not the writer failing: the answer was written and could not be checked.
                reason: Reason = "judge_error" if isinstance(exc, JudgeError) else "model_error"
                outcome = run.finish("blocked", reason, detail=str(exc))
            finally:
                run.record("spend", await self.guards.spend_settle(reservation, usages))
        if outcome.response.status != "blocked" and use_cache:
            await self.guards.cache_put(cache_key, run.question, outcome.response)
        return outcome

    async def _answer(self, run: _Run, usages: list[Usage]) -> Outcome:
        read = await self._screen_and_retrieve(run, usages)
        if isinstance(read, Outcome):
            return read
        # 8. Generation from the retrieved passages only, as the quarantine left them.
        generated = await generate(run.question, self.profile.generator, read)
        usages.append(generated.generation.usage)
        run.record("generation", generated.stage)
        answer = generated.generation.answer
        if run.on_candidate is not None:
            run.on_candidate(answer)
        if not answer:
            for name in ("decomposition", "entailment", "lexical_check", "groundedness"):
                getattr(run.stages, name).detail = "skipped: the generator gave no answer"
            await self._closest(run, read)
            return run.finish("refused", "no_answer")
        return await self._verify(run, answer, read, usages)

    async def _screen_and_retrieve(self, run: _Run, usages: list[Usage]) -> Outcome | list[ScoredPassage]:
        """7. Screening by the classifier (the deny-list ran before admission), with retrieval and then the
        quarantine of what the passages say to the model: the passages every later stage reads, or the
        answer when screening blocked the question. A screener that reads the passages (the local one weighs
        the question against what the quarantine left) waits for them; any other (a model call) runs
        alongside embedding and retrieval."""
        s, question = self.settings, run.question
        retrieval_task = asyncio.create_task(
            retrieve(
                question,
                self.embedder,
                self.store,
                s.retrieval.k,
                s.retrieval.mode,
                self.corpora.get(run.corpus, UNKNOWN_CORPUS).embedding_model,
                corpus=run.corpus,
            )
        )
        screen_timer = Timer()
        try:
            if not self.profile.screener_reads_passages:
                screening = asyncio.create_task(screen_classifier(question, self.profile.screener, []))
                try:
                    retrieval: RetrievalOutcome = await retrieval_task
                    await self._stored_sentences(run.corpus, retrieval.passages)
                    held = quarantine(retrieval.passages)
                    _record_passages(run, retrieval, held)
                    screened = await screening
                finally:
                    if not screening.done():
                        screening.cancel()
            else:
                retrieval = await retrieval_task
                await self._stored_sentences(run.corpus, retrieval.passages)
                held = quarantine(retrieval.passages)
                _record_passages(run, retrieval, held)
                screened = await screen_classifier(question, self.profile.screener, held.passages)
                screened.stage.ms = round(max(0.0, screen_timer.ms - retrieval.stage.ms - held.stage.ms), 2)
        finally:
            if not retrieval_task.done():
                retrieval_task.cancel()
        if screened.usage:
            usages.append(screened.usage)
        run.record("screening", screened.stage)
        if screened.blocked:
            return run.finish("blocked", screened.stage.reason or "injection")
        return held.passages

    async def _stored_sentences(self, corpus: str, passages: Sequence[ScoredPassage]) -> None:
        """Hand the profile the vectors ingest stored for the retrieved passages' sentences (one query), so
        the verifier embeds none of them: on the request path only the question, and what a generated
        answer words its own way, are embedded."""
        if self.profile.sentence_vectors is None or not passages:
            return
        texts = {p.id: p.text for p in passages}
        rows = await self.store.sentence_vectors(corpus, list(texts), T.SEGMENTER_VERSION, self.embedder.model_name)
        self.profile.sentence_vectors((texts[pid][start:end], vector) for pid, start, end, vector in rows)

    async def _verify(self, run: _Run, answer: str, passages: Sequence[ScoredPassage], usages: list[Usage]) -> Outcome:
        """9-12. Claims, entailment, the lexical sanity check and the gate; the answer with citations derived
        from the verified support, or the refusal with the answer withheld."""
        stages, question = run.stages, run.question
        combined = self.profile.decompose_and_verify
        model_verdicts: tuple[str, Verification] | None = None
        if combined is not None:
            # One model call gives the claims and the model's verdicts; the local verifier still scores
            # every claim itself, and a claim is supported only when both agree.
            decomposed, model_verification = await decompose_and_verify(question, answer, passages, combined)
            model_verdicts = (combined.name, model_verification)
        else:
            decomposer = self.profile.decomposer
            assert decomposer is not None  # a Profile has one or the other (Profile.__post_init__)
            decomposed = await decompose(question, answer, decomposer)
        usages.append(decomposed.usage)
        # The claims dropped (about the sources, or not the answer's) are the model's words: not told before the
        # gate decides, nor after a refusal.
        run.record("decomposition", decomposed.stage, told=_withhold_dropped(decomposed.stage))
        entailed = await entail(
            question, decomposed.claims, passages, self.profile.verifier, model_verdicts=model_verdicts
        )
        usages.extend(entailed.usages)
        run.record("entailment", entailed.stage)
        checked = lexical_check(entailed.claims, passages, question)
        run.record("lexical_check", checked.stage)
        verdict = gate(checked.claims, self.settings.gate)
        if verdict.decision != "pass":
            log.debug("refused answer", answer=answer, score=verdict.score)
            run.record(
                "groundedness",
                msgspec.structs.replace(verdict, claims=[withhold_unquoted(c, passages) for c in verdict.claims]),
            )
            stages.decomposition = _withhold_dropped(stages.decomposition)
            await self._closest(run, passages)
            return run.finish("refused", "not_an_answer" if verdict.failed == "relevance" else "not_grounded")
        run.record("groundedness", verdict)
        citations = citations_from_support(checked.claims, passages, self.settings.gate.min_claim)
        return run.finish("answered", None, answer=answer, citations=citations)

    async def _closest(self, run: _Run, passages: Sequence[ScoredPassage]) -> None:
        """A refusal shows, in each retrieved passage, the sentence closest to the question (stages/closest.py)."""
        closest = await closest_sentences(run.question, passages, self.profile.verifier, self.embedder)
        retrieval = run.stages.retrieval
        run.stages.retrieval = msgspec.structs.replace(retrieval, passages=with_closest(retrieval.passages, closest))


def _record_passages(run: _Run, retrieval: RetrievalOutcome, held: QuarantineOutcome) -> None:
    # The retrieval record shows the passages as every later stage reads them: what the quarantine held back is
    # not put on show either.
    run.record("retrieval", msgspec.structs.replace(retrieval.stage, passages=passage_records(held.passages)))
    run.record("quarantine", held.stage)


class _Entry(msgspec.Struct, frozen=True):
    """What a request that passed the checks at the door carries into the rest of the run."""

    cache_key: str
    client_key: str


def _rate_limited(run: _Run) -> Outcome:
    retry = str(run.stages.rate_limit.retry_after_s or 60)
    return run.finish("blocked", "rate_limited", http_status=429, headers={"Retry-After": retry})


NOT_COUNTED = "not counted: a cached answer costs no model call"
# Outcomes that did no work the client should pay for: their request is given back to the hourly limit.
REFUNDED = frozenset({"model_error", "judge_error", "budget_exhausted"})

WITHHELD = "(withheld: a claim of the refused answer that the documents do not contain word for word)"
WITHHELD_DROPPED = "(withheld: a claim about the sources, dropped before checking)"
WITHHELD_NOT_IN_ANSWER = "(withheld: a claim the answer doesn't make, dropped before checking)"


def _withhold_dropped(stage: DecompositionStage) -> DecompositionStage:
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


class _Run:
    """Builds the final AskResponse from whatever stages ran."""

    def __init__(
        self,
        pipeline: Pipeline,
        question: str,
        request_id: str,
        stages: Stages,
        started: float,
        corpus: str,
        on_candidate: Callable[[str], None] | None = None,
        on_stage: OnStage | None = None,
    ) -> None:
        self.pipeline = pipeline
        self.question = question
        self.request_id = request_id
        self.stages = stages
        self.started = started
        self.corpus = corpus
        self.on_candidate = on_candidate
        self.on_stage = on_stage

    def record(self, name: str, record: StageRecord, *, told: StageRecord | None = None) -> None:
        """Set a stage's record and tell `on_stage` (`told`, when what may be told before the gate decides is
        less than the record)."""
        setattr(self.stages, name, record)
        if self.on_stage is not None:
            self.on_stage(name, told or record)

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
        message = explain(reason, stages, detail)
        response = AskResponse(
            request_id=self.request_id,
            question=self.question,
            status=status,
            reason=reason,
            answer=answer if status == "answered" else None,
            citations=citations or [] if status == "answered" else [],
            cached=False,
            profile=self.pipeline.profile.name,
            total_ms=round((time.perf_counter() - self.started) * 1000, 2),
            stages=stages,
            headline=headline_for(reason, stages),
            message=message,
            corpus_version=self.pipeline.corpora.get(self.corpus, UNKNOWN_CORPUS).version,
            corpus=self.corpus,
        )
        return Outcome(response, http_status, headers or {})


def _skip_reason(status: Status, reason: Reason | None) -> str:
    if status == "blocked":
        return f"skipped: the request was blocked ({reason})"
    if status == "refused":
        return f"skipped: the request was refused ({reason})"
    return "skipped"
