"""The one place that orders the stages of /ask.

bot check -> conversation -> cache -> rate limit -> deny-list -> admission -> spend cap -> the answer (answering.py:
screening -> retrieval -> quarantine -> generation -> decomposition -> entailment -> lexical check -> gate ->
citations). This module holds the checks at the door, the client's place in its hourly limit (given back when
the answer fails on our side) and the spend cap around the answer. Every stage leaves its record in the run
(response.py); a stage that did not run says so and why, and a caller that passes `on_stage` is told each
record as it is set (the streamed /ask). A refused answer's text never leaves the pipeline (debug log only),
except to an in-process caller that asks for it by `on_candidate` (the eval harness, whose threshold sweep
scores it): no stage record holds it, and the gate's is told only once its claims are withheld.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping

import msgspec

from provenance.access.clients import Client
from provenance.claims.vectors import WordVectors
from provenance.conversations.service import Conversations, UnknownConversation
from provenance.errors import JudgeError, ModelError
from provenance.guards.base import BotCheckResult, Guards, NoGuards, RateLimitResult
from provenance.inference.embedder import Embedder, one_request
from provenance.logs import get_logger
from provenance.pipeline.admission import Admission
from provenance.pipeline.answering import Answering
from provenance.pipeline.corpora import CorpusRegistry
from provenance.pipeline.observe import AskObserver, NoObserver
from provenance.pipeline.run import OnStage, Outcome, Run
from provenance.ports import Profile, Usage
from provenance.settings import Settings
from provenance.stages.condense import Previous, condense
from provenance.stages.screen import screen_deny_list
from provenance.store.corpora import CorpusStore
from provenance.wire import AdmissionStage, AskResponse, Reason

log = get_logger("provenance.pipeline.door")

# Outcomes that did no work the client should pay for: their request is given back to the hourly limit.
REFUNDED = frozenset({"model_error", "judge_error", "budget_exhausted"})


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
        corpora: CorpusRegistry | None = None,
        conversations: Conversations | None = None,
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
        self.corpora = corpora or CorpusRegistry(store, embedder, profile)
        # None: no conversations (an in-process run); a question then starts none, and a follow-up is unknown.
        self.conversations = conversations
        self._answering = Answering(settings, store, embedder, profile, self.corpora)
        # The local condenser's word vectors (stages/condense.py `replace_slot`): a follow-up's few words,
        # cached across turns.
        self._words = WordVectors(embedder, capacity=5_000)

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
        return Pipeline(
            settings,
            self.store,
            self.embedder,
            self._profile,
            self._guards,
            self._observer,
            self.corpora.copy(),
            self.conversations,
        )

    def answer_cache_key(self, question: str, corpus: str) -> str:
        version = self.corpora.of(corpus).version
        return self.guards.cache_key(question, f"{corpus}@{version or '-'}", self.settings_fingerprint())

    def settings_fingerprint(self) -> str:
        s = self.settings
        return (
            f"{self.profile.name}|{self.profile.cache_tag}|{s.embedding.model}|"
            f"{s.retrieval.k}|{s.retrieval.mode}|{s.gate.threshold}|{s.gate.min_claim}|"
            f"{s.gate.relevance}|{s.gate.relevance_uncertain}|"
            # What a model is shown and asked: the passages' budget in its prompts, and where the claims come from.
            f"{self.profile.passage_tokens}|{s.claims_from}"
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
        conversation_id: str | None = None,
        on_candidate: Callable[[str], None] | None = None,
        on_stage: OnStage | None = None,
    ) -> Outcome:
        """`on_candidate`, for in-process callers only, is told the generated answer (empty when the generator
        found none) before it is checked, so also the answer of a request that ends refused. `on_stage` is told
        each stage's record as it is set (a stage that runs twice, the rate limit or the spend cap, twice);
        the admission record means a pipeline slot is held. With `conversation_id` the question is a follow-up
        in that conversation (the caller's own, else UnknownConversation); without, it starts one."""
        started = time.perf_counter()
        headers = headers or {}
        await self.corpora.notice_new()
        headers = headers or {}
        # 1. Bot check: Turnstile for browsers, an API key for other apps. It says who asks, and so which
        # corpora exist for them, before any corpus is looked up: a client that may not read a corpus gets
        # the 404 a name that exists nowhere gets. Turnstile is told the client's address (behind our
        # proxies, not the proxy's), so resolve it once here.
        client_ip = self.guards.client_ip(peer_ip, headers)
        bot = await self.guards.bot_check(turnstile_token, headers.get("authorization"), client_ip)
        if bot.client is None or bot.stage.status == "blocked":
            # Refused at the door: the corpus is echoed as asked, and nothing of it (not its version) is told.
            run = Run(self.corpora, self.profile.name, question, request_id, started, corpus or "", resolved=False)
            outcome = self._refused_at_the_door(run, bot)
        else:
            resolved = await self.corpora.resolve(corpus, bot.client)
            run = Run(self.corpora, self.profile.name, question, request_id, started, resolved, on_candidate, on_stage)
            door = _Door(turnstile_token, peer_ip, headers, use_cache, conversation_id, corpus)
            admitted = await self._at_the_door(run, door, bot, client_ip)
            outcome = admitted if isinstance(admitted, Outcome) else await self._charged(run, admitted, use_cache)
            if run.thread is not None and self.conversations is not None:
                # The request's own, set after the cache was written: never part of a cached answer.
                response = outcome.response
                response.conversation_id, response.turn = run.thread.id, run.thread.turn
                response.standalone_question = run.searched
                self.conversations.keep(run.thread, response)
        # Counted here, where every answer passes (cached, blocked at the door, or the whole run; streamed or
        # not): by what happened, not by the HTTP status it leaves with.
        self._observer.outcome(outcome.response)
        return outcome

    @staticmethod
    def _refused_at_the_door(run: Run, bot: BotCheckResult) -> Outcome:
        run.record(bot.stage)
        if bot.unauthorized:
            # A bad bearer key is a failed authentication, not a forbidden request (RFC 6750 §3).
            challenge = {"WWW-Authenticate": 'Bearer error="invalid_token"'}
            return run.finish("blocked", "invalid_api_key", http_status=401, headers=challenge)
        return run.finish("blocked", "bot_check_failed")

    async def _at_the_door(self, run: Run, door: _Door, bot: BotCheckResult, client_ip: str) -> Outcome | _Entry:
        """The checks a request that passed the bot check meets before any work: the conversation, the cache
        and a look at the rate limit. The answer when one of them settles the request, else what the rest of
        the run needs."""
        use_cache = door.use_cache
        run.record(bot.stage)

        client_key = bot.client_key or client_ip
        assert bot.client is not None  # ask() refused a request without one at the door
        await self._thread(run, door, client_key, bot.client)

        # 2. Cache, before the rate limit: a cached answer is one indexed read and no model call, so it is
        # not counted against the hourly limit, and a client that has used its quota up still gets it. A
        # follow-up's answer depends on what it is condensed to: looked up after condensing.
        cache_key = self.answer_cache_key(run.question, run.corpus)
        if not run.follow_up:
            if use_cache:
                hit = await self.guards.cache_get(cache_key)
                run.record(hit.stage)
                if hit.response is not None:
                    # One entry is one key written at one time (a rewrite moves its created_at).
                    at = hit.stage.cached_at
                    return run.cached(hit.response, served_from=f"{cache_key}@{at}" if at else None)
            else:
                run.stages.cache.detail = "cache bypassed for this run"

        # 3. Rate limit, per API key when one was presented, else per client IP: a look first, so a client
        # over its limit is turned away at once; the request takes its place only when it is about to be
        # worked on (below), so one that waited and was turned away as overloaded never held a place.
        look = await self.guards.rate_limit(client_key, count=False)
        run.record(look.stage)
        if look.stage.status == "blocked":
            return run.rate_limited()
        return _Entry(cache_key=cache_key, client_key=client_key)

    async def _thread(self, run: Run, door: _Door, client_key: str, client: Client) -> None:
        """This turn's conversation: a new one, or the client's own (404 otherwise; 409 for another corpus or
        a full one), whose corpus the follow-up is asked of, if this client may still read it (else the 404
        of a corpus that doesn't exist)."""
        if self.conversations is None:
            if door.conversation_id is not None:
                raise UnknownConversation()
            return
        thread = await self.conversations.open(door.conversation_id, client_key, door.corpus)
        if thread.corpus is not None and thread.corpus != run.corpus:
            run.corpus = await self.corpora.resolve(thread.corpus, client)
        run.thread = thread

    async def _condensed(self, run: Run, use_cache: bool) -> Outcome | AskResponse:
        """A follow-up: condensed, then its cache lookup (keyed by the standalone question and the carried
        passages), then the answer. A cached answer is handed back as it was stored, for the caller to serve
        once the spend (the condense call) is settled."""
        thread = run.thread
        assert thread is not None and self.conversations is not None
        before = thread.previous
        previous = Previous(
            standalone_question=before.standalone_question if before else "",
            cited_passage_ids=before.passage_ids if before else [],
            earlier=[(e.question, e.answer) for e in thread.earlier if e.status != "blocked"],
        )
        condensed = await condense(
            run.question,
            previous,
            self.profile.condenser,
            max_chars=self.settings.server.max_question_chars,
            similarity=self._words.similarity,
        )
        run.take(condensed)
        if condensed.blocked:
            return run.finish("blocked", "bad_rewrite", detail=condensed.blocked_because)
        run.standalone, run.queries, run.own_terms = condensed.standalone, condensed.queries, condensed.own_terms
        run.asks, run.previous_answer = condensed.asks, condensed.previous_answer
        run.second_reading = condensed.second_reading
        run.carried = await self.conversations.store.passages(run.corpus, condensed.carried)
        run.rank_carried = condensed.leans
        carried = ",".join(sorted(p.id for p in run.carried))
        # Both readings key it: the answer may be the second's.
        readings = "\0".join(r for r in (run.standalone, run.second_reading) if r)
        run.cache_key = self.answer_cache_key(f"{readings}\0{carried}", run.corpus)
        if use_cache:
            hit = await self.guards.cache_get(run.cache_key)
            run.record(hit.stage)
            if hit.response is not None:
                return hit.response
        else:
            run.stages.cache.detail = "cache bypassed for this run"
        return await self._answering.answer(run)

    async def _charged(self, run: Run, entry: _Entry, use_cache: bool) -> Outcome:
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

    async def _count(self, run: Run, client_key: str, counted: list[RateLimitResult]) -> Outcome | None:
        """Take this request's place in the client's hourly limit; the 429 when another took the last one."""
        limit = await self.guards.rate_limit(client_key)
        run.record(limit.stage)
        if limit.stage.status == "blocked":
            return run.rate_limited()
        counted.append(limit)
        return None

    async def _admitted(
        self, run: Run, cache_key: str, use_cache: bool, client_key: str, counted: list[RateLimitResult]
    ) -> Outcome:
        # 4. The deny-list: free, so it never waits for a pipeline slot; still counted, so that a flood of
        # injection attempts is limited like any other.
        denied = screen_deny_list(run.question)
        if denied is not None:
            run.take(denied)
            return await self._count(run, client_key, counted) or run.finish("blocked", "injection")

        # 5. A pipeline slot (pipeline/admission.py): past the queue's bound or deadline this raises Overloaded.
        waiting = self.admission.waiting
        async with self.admission.slot() as waited_s:
            running = self.admission.running
            run.record(AdmissionStage(status="ok", ms=round(waited_s * 1000, 2), running=running, waiting=waiting))
            limited = await self._count(run, client_key, counted)
            if limited is not None:
                return limited
            # 6. Spend cap: reserve the worst-case cost before any paid call (a follow-up's condense call too).
            reservation = await self.guards.spend_reserve(self._priced(run))
            run.record(reservation.stage)
            if reservation.stage.status == "blocked":
                return run.finish("blocked", "budget_exhausted")
            answered: Outcome | AskResponse | None = None
            try:
                # Every stage that embeds the question (screening, retrieval, generator, verifier) shares one
                # embedding of it.
                with one_request():
                    answered = await self._condensed(run, use_cache) if run.follow_up else None
                    if answered is None:
                        outcome = await self._answering.answer(run)
                    elif isinstance(answered, Outcome):
                        outcome = answered
            except ModelError as exc:
                log.warning("model error", error=str(exc))
                self._observer.model_error(exc)
                # A call that was billed but gave unusable output (ModelOutputError) still costs its usage.
                if exc.usage is not None:
                    run.usages.append(exc.usage)
                # The judge failing is not the writer failing: the answer was written and could not be checked.
                reason: Reason = "judge_error" if isinstance(exc, JudgeError) else "model_error"
                outcome = run.finish("blocked", reason, detail=str(exc))
            finally:
                run.record(await self.guards.spend_settle(reservation, run.usages))
        if isinstance(answered, AskResponse):
            # Served from the cache after condensing: the condense call was paid for, and is settled above.
            return run.cached_follow_up(answered)
        if outcome.response.status != "blocked" and use_cache:
            await self.guards.cache_put(run.cache_key or cache_key, run.searched, outcome.response)
        return outcome

    def _priced(self, run: Run) -> Profile:
        """The profile as the spend cap prices this request: a follow-up's condense call added, and its calls
        twice, since its answer may be written and checked a second time against the rules' reading
        (stages/condense.py `second_reading`)."""
        condenser, inner = self.profile.condenser, self.profile.worst_case
        if not run.follow_up or condenser is None or inner is None:
            return self.profile

        def worst_case(passage_tokens: int) -> list[Usage]:
            calls = list(inner(passage_tokens))
            return [*calls, *calls, condenser.worst_case()]

        return msgspec.structs.replace(self.profile, worst_case=worst_case)


class _Door(msgspec.Struct, frozen=True):
    """What the checks at the door read of the request."""

    turnstile_token: str | None
    peer_ip: str | None
    headers: Mapping[str, str]
    use_cache: bool
    conversation_id: str | None
    corpus: str | None


class _Entry(msgspec.Struct, frozen=True):
    """What a request that passed the checks at the door carries into the rest of the run."""

    cache_key: str
    client_key: str
