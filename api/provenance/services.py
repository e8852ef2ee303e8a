"""Everything a running service holds: settings, pool, store, embedder, profile, pipeline."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property

import asyncpg
import msgspec

from provenance.access.store import AccessStore
from provenance.claims import LocalVerifier, build_verifier
from provenance.conversations.service import Conversations
from provenance.feedback.desk import FeedbackDesk
from provenance.feedback.responses import ResponseLog, served_settings
from provenance.guards.base import Guards
from provenance.inference.embedder import BatchingEmbedder, Embedder, FastEmbedEmbedder, get_embedder
from provenance.metrics import PrometheusObserver
from provenance.pipeline.door import Pipeline
from provenance.ports import Profile, Usage
from provenance.profiles.local import build_local_profile
from provenance.settings import Settings
from provenance.store import Store
from provenance.store.conversations import ConversationStore
from provenance.store.guards import GuardStore
from provenance.store.pool import create_pool, migrate, resolve_database_url


@dataclass
class Services:
    settings: Settings
    pool: asyncpg.Pool
    store: Store
    embedder: Embedder
    profile: Profile
    pipeline: Pipeline
    # Readers' verdicts and the responses they rate; None with FEEDBACK_ENABLED=false.
    feedback: FeedbackDesk | None = None

    @cached_property
    def access(self) -> AccessStore:
        """Keys' roles and grants, and which corpora are private: over the same pool."""
        return AccessStore(self.pool, self.store.acquire_timeout_s)

    async def close(self) -> None:
        if self.pipeline.conversations is not None:
            # Turns that wait are written: a follow-up after a restart still finds them.
            await self.pipeline.conversations.log.aclose()
        if self.feedback is not None:
            # What waits to be written, written: those responses can still be rated after a restart.
            await self.feedback.responses.aclose()
        # The guards hold an HTTP client (Turnstile) that must close before the loop does.
        await self.pipeline.guards.aclose()
        if self.profile.judge is not None:
            # Its model server is a child process: it goes with the service.
            await asyncio.to_thread(self.profile.judge.close)
        await self.pool.close()


def load_embedder(settings: Settings, *, for_ingest: bool = False, threads: int | None = None) -> Embedder:
    """The service's embedder (one per process); `for_ingest`, one of its own without onnxruntime's memory
    arena, dropped when the ingest is done, so that a long ingest's memory stays bounded, with `threads`
    (default EMBED_THREADS)."""
    e = settings.embedding
    if for_ingest:
        return FastEmbedEmbedder(e.model, settings.data_dir, threads or e.threads, e.batch_size, memory_arena=False)
    inner = get_embedder(e.model, settings.data_dir, e.threads, e.batch_size)
    if settings.embedding.batch_wait_ms <= 0:
        return inner
    return BatchingEmbedder(inner, wait_s=settings.embedding.batch_wait_ms / 1000)


def build_profile(settings: Settings, embedder: Embedder) -> Profile:
    """The profile the settings name, with the local verifier `LOCAL_VERIFIER` names and the reading judge
    `JUDGE` names: chosen here, once, for every profile. A paid judge's calls join the profile's worst case."""
    local = build_verifier(settings, embedder)
    profile = msgspec.structs.replace(_profile(settings, embedder, local), judge=local.judge and local.judge.handle)
    return with_judge_costs(profile, local, settings)


def with_judge_costs(profile: Profile, local: LocalVerifier, settings: Settings) -> Profile:
    """A priced judge's calls counted in the spend cap's worst-case reservation (its own, in a free profile)."""
    # Anthropic's API is paid whatever JUDGE_PRICE_* say: its list prices (`pricing.price_table`).
    if local.judge is None or not (settings.judge.priced or settings.judge.name == "anthropic"):
        return profile
    judge = local.judge.judge
    inner = profile.worst_case

    def worst_case(passage_tokens: int) -> list[Usage]:
        calls = list(inner(passage_tokens)) if inner is not None else []
        return calls + judge.worst_case(passage_tokens)

    return msgspec.structs.replace(profile, worst_case=worst_case)


def _profile(settings: Settings, embedder: Embedder, local: LocalVerifier) -> Profile:
    if settings.profile == "anthropic":
        from provenance.profiles.anthropic import build_anthropic_profile

        return build_anthropic_profile(settings, embedder, local=local)
    if settings.profile == "openai":
        from provenance.profiles.openai_compatible import build_openai_profile

        return build_openai_profile(settings, embedder, local=local)
    return build_local_profile(embedder, settings.local_generator, settings.gate.threshold, local=local)


def build_guards(settings: Settings, store: GuardStore) -> Guards:
    from provenance.guards.postgres import PostgresGuards

    return PostgresGuards(settings, store)


def build_feedback(pipeline: Pipeline, store: Store) -> FeedbackDesk | None:
    settings = pipeline.settings
    if not settings.feedback.enabled:
        return None
    served = served_settings(settings, pipeline.profile.name, pipeline.profile.cache_tag)
    return FeedbackDesk(settings, store, pipeline.guards, ResponseLog(store, settings, served))


async def build_services(
    settings: Settings,
    *,
    with_guards: bool = True,
    guards: Callable[[Settings, GuardStore], Guards] = build_guards,
) -> Services:
    """`guards` builds the pipeline's guards (the service's own by default), unless `with_guards` is off:
    then none apply, and each stage says so.

    Start-up computes nothing from the corpus: the passages' sentence vectors were stored at ingest, and the
    pipeline reads those of the passages each question retrieves."""
    dsn = resolve_database_url(settings)
    pool = await create_pool(dsn, settings)
    await migrate(pool)
    store = Store(pool, settings.database.timeout_s)
    embedder = load_embedder(settings)
    profile = build_profile(settings, embedder)
    observer = PrometheusObserver(settings) if settings.metrics.enabled else None
    conversations = Conversations(settings, ConversationStore(pool, settings.database.timeout_s), store.feedback_secret)
    pipeline = Pipeline(
        settings,
        store,
        embedder,
        profile,
        guards(settings, store) if with_guards else None,
        observer,
        conversations=conversations,
    )
    await pipeline.corpora.refresh()
    return Services(settings, pool, store, embedder, profile, pipeline, feedback=build_feedback(pipeline, store))
