"""`provenance serve`: the HTTP API and the web page, on a migrated (and, with --ingest, ingested) database."""

from __future__ import annotations

import argparse
import asyncio
import atexit
import os
import shutil
import tempfile
from pathlib import Path

from provenance.cli import common
from provenance.cli.db import migrate_database
from provenance.cli.ingest import fill_sentences_now, ingest_folder
from provenance.wire import DEFAULT_CORPUS


def _metrics_dir() -> Path | None:
    """One PROMETHEUS_MULTIPROC_DIR for every worker of this server, so a scrape that reaches any one of them
    reports all of them (provenance.metrics). The workers inherit it from this process's environment, and it
    must be set before prometheus-client is first imported, here as in each worker. An operator's own folder
    is emptied (counts from an earlier run would be added to this one's); otherwise a fresh one is made, and
    returned so that it can be removed when the server stops."""
    given = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if given:
        folder = Path(given)
        folder.mkdir(parents=True, exist_ok=True)
        for stale in folder.glob("*.db"):
            stale.unlink()
        return None
    made = Path(tempfile.mkdtemp(prefix="provenance-metrics-"))
    os.environ["PROMETHEUS_MULTIPROC_DIR"] = str(made)
    return made


def cmd_serve(args: argparse.Namespace) -> int:
    settings = common.settings()
    made = _metrics_dir() if settings.metrics.enabled else None
    if made is not None:
        atexit.register(shutil.rmtree, made, ignore_errors=True)
    host = args.host or settings.server.host
    port = settings.server.port if args.port is None else args.port
    if settings.database.url is None:
        # Start the embedded server here, in the parent, so that every worker joins one Postgres and
        # Ctrl-C on this process stops it cleanly.
        from provenance.store.embedded_pg import start_embedded

        os.environ["DATABASE_URL"] = start_embedded(settings.pg_data_dir)
        settings = common.settings()
    if args.ingest:
        from provenance.errors import CorpusConflict

        try:
            print(asyncio.run(ingest_folder(settings, settings.ingest.corpus_dir, False, DEFAULT_CORPUS)), flush=True)
        except CorpusConflict as exc:
            # Someone put another folder in the default corpus on purpose (--replace): serve it, say so.
            print(f"not ingesting {settings.ingest.corpus_dir}: {exc}", flush=True)
    else:
        asyncio.run(migrate_database(settings))
    # A database ingested before sentence vectors were stored gets them now, once, with a progress bar,
    # rather than each worker embedding them at every start.
    fill_sentences_now(settings)
    return _serve(args, host, port, settings.profile, settings.server.keep_alive_s)


def _serve(args: argparse.Namespace, host: str, port: int, profile: str, keep_alive_s: int) -> int:
    """Bind, say where, then serve until Ctrl-C. The socket is bound before the address is printed, so that
    port 0 takes any free port and the line names it: a caller that picked a free port itself and passed it
    could lose it to another process before the server bound it."""
    import uvicorn
    from uvicorn.supervisors import Multiprocess

    from provenance.http.uvicorn_protocols import http_protocol

    config = uvicorn.Config(
        "provenance.app:create_app",
        factory=True,
        host=host,
        port=port,
        workers=args.workers,
        # uvicorn's own protocol, with a deadline for request headers that uvicorn lacks (slow clients).
        http=http_protocol(args.http),
        loop=args.loop,
        log_level="warning",
        access_log=False,
        timeout_keep_alive=keep_alive_s,
        timeout_graceful_shutdown=5,
    )
    sock = config.bind_socket()  # as uvicorn.run binds it: its error, and exit status 3, when it can't
    print(f"serving on http://{host}:{sock.getsockname()[1]} (profile {profile}); Ctrl-C stops", flush=True)
    server = uvicorn.Server(config)
    try:
        if config.workers > 1:
            Multiprocess(config, sockets=[sock]).run()
        else:
            config.load_app()
            server.run(sockets=[sock])
    except KeyboardInterrupt:
        pass
    finally:
        sock.close()
    # uvicorn.run's exit status when a single worker never started.
    return 3 if config.workers == 1 and not server.started else 0


def add(sub: common.Subparsers) -> None:
    serve = sub.add_parser("serve", help="run the HTTP API and the web page")
    serve.add_argument("--host", default=None, help="bind address (default: HOST or 127.0.0.1)")
    serve.add_argument(
        "--port", type=int, default=None, help="port (default: PORT or 8000); 0: any free port, printed once bound"
    )
    serve.add_argument("--workers", type=int, default=1, help="uvicorn worker processes")
    serve.add_argument("--ingest", action="store_true", help="ingest CORPUS_DIR first when it changed")
    # httptools and uvloop are installed with us and chosen by "auto"; the others are for comparing.
    serve.add_argument("--http", choices=["auto", "h11", "httptools"], default="auto", help=argparse.SUPPRESS)
    serve.add_argument("--loop", choices=["auto", "asyncio", "uvloop"], default="auto", help=argparse.SUPPRESS)
    serve.set_defaults(func=cmd_serve)
