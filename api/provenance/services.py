"""Everything a running service holds: settings, pool, store, embedder, profile, pipeline."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import asyncpg

from provenance.db import create_pool, migrate, resolve_database_url
from provenance.embedder import BatchingEmbedder, Embedder, FastEmbedEmbedder, get_embedder
from provenance.guards.base import Guards
from provenance.metrics import PrometheusObserver
from provenance.pipeline import Pipeline
from provenance.ports import Profile
from provenance.profiles.local import build_local_profile
from provenance.settings import Settings
from provenance.store import GuardStore, Store
from provenance.verifiers import build_verifier


@dataclass
class Services:
    settings: Settings
    pool: asyncpg.Pool
    store: Store
    embedder: Embedder
    profile: Profile
    pipeline: Pipeline

    async def close(self) -> None:
        # The guards hold an HTTP client (Turnstile) that must close before the loop does.
        await self.pipeline.guards.aclose()
        await self.pool.close()


def load_embedder(settings: Settings, *, for_ingest: bool = False) -> Embedder:
    """The service's embedder (one per process); `for_ingest`, one of its own without onnxruntime's memory
    arena, dropped when the ingest is done, so that a long ingest's memory stays bounded."""
    e = settings.embedding
    if for_ingest:
        return FastEmbedEmbedder(e.model, settings.data_dir, e.threads, e.batch_size, memory_arena=False)
    inner = get_embedder(e.model, settings.data_dir, e.threads, e.batch_size)
    if settings.embedding.batch_wait_ms <= 0:
        return inner
    return BatchingEmbedder(inner, wait_s=settings.embedding.batch_wait_ms / 1000)


def build_profile(settings: Settings, embedder: Embedder) -> Profile:
    """The profile the settings name, with the local verifier `LOCAL_MODELS` names: chosen here, once, for
    every profile."""
    local = build_verifier(settings.local_models, embedder)
    if settings.profile == "anthropic":
        from provenance.profiles.anthropic import build_anthropic_profile

        return build_anthropic_profile(settings, embedder, local=local)
    if settings.profile == "openai":
        from provenance.profiles.openai_compatible import build_openai_profile

        return build_openai_profile(settings, embedder, local=local)
    return build_local_profile(embedder, settings.local_models, settings.gate.threshold, local=local)


def build_guards(settings: Settings, store: GuardStore) -> Guards:
    from provenance.guards.postgres import PostgresGuards

    return PostgresGuards(settings, store)


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
    pipeline = Pipeline(settings, store, embedder, profile, guards(settings, store) if with_guards else None, observer)
    await pipeline.refresh_corpus()
    return Services(settings, pool, store, embedder, profile, pipeline)
