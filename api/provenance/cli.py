"""The `provenance` command. Each subcommand prints its result on stdout and nothing else: errors go to
stderr, and the embedded Postgres's own account of starting goes to a log file under the data folder."""

from __future__ import annotations

import argparse
import asyncio
import atexit
import ctypes
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

import asyncpg
import msgspec

if TYPE_CHECKING:
    from provenance.store.corpora import CorpusState

from provenance.errors import ConfigurationError, SettingsError
from provenance.logs import configure_logging
from provenance.settings import Settings, load_settings
from provenance.wire import DEFAULT_CORPUS

DESCRIPTION = """\
Answers questions from a folder of documents, and refuses, showing the evidence, when the documents
don't support an answer."""

EPILOG = """\
getting started:
  provenance serve --ingest      ingest corpus/ (when it changed) and serve http://127.0.0.1:8000
  provenance ingest DIR --corpus NAME
                                 add your own folder of documents beside corpus/; the page
                                 then lets you pick it, and /ask takes {{"corpus": NAME}}.
                                 Reads {formats}
  provenance corpora             the corpora, with their folders, sizes and versions
  provenance corpora remove NAME remove one (asks first)
  provenance keys create NAME    an API key for a script or app that isn't a browser
                                 (--role reader|editor|admin, --corpus C for a private corpus)
  provenance corpora create NAME --private
                                 a corpus only keys granted it can see

Settings are environment variables (DATABASE_URL, PROFILE, ANTHROPIC_API_KEY, CORPUS_DIR, PORT, ...);
without DATABASE_URL an embedded PostgreSQL runs from .data/. The README lists them all.
Run `provenance COMMAND --help` for a command's options."""


class Mistake(Exception):
    """A user's mistake (an argument, a name that doesn't exist, a setting that makes the command pointless):
    `main` prints it as one line on stderr and exits 2, never a traceback."""


class _Parser(argparse.ArgumentParser):
    """argparse's own errors as one line too (`provenance serve: error: argument --port: invalid int value:
    'x'`), not its usage block and then the line."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def _formats() -> str:
    """The formats ingest reads, as the help names them (from the readers themselves, so none is missed)."""
    from provenance.ingest.documents.read import SUFFIXES

    return ", ".join(SUFFIXES[:-1]) + f" and {SUFFIXES[-1]} files"


def _settings() -> Settings:
    try:
        settings = load_settings()
    except SettingsError as exc:
        print(f"configuration error: {exc}", file=sys.stderr)
        raise SystemExit(2) from None
    # Logs go to stderr at the configured level, so a command's own output on stdout stays clean.
    configure_logging(settings.server.log_level)
    return settings


async def _with_pool(settings: Settings) -> asyncpg.Pool:
    from provenance.store.pool import create_pool, migrate, resolve_database_url

    pool = await create_pool(resolve_database_url(settings), settings)
    await migrate(pool)
    return pool


async def _migrate(settings: Settings) -> list[str]:
    from provenance.store.pool import create_pool, migrate, resolve_database_url

    pool = await create_pool(resolve_database_url(settings), settings)
    try:
        return await migrate(pool)
    finally:
        await pool.close()


async def _ingest(settings: Settings, directory: Path, force: bool, corpus: str, replace: bool = False) -> str:
    from provenance.ingest.folder import ingest
    from provenance.services import load_embedder
    from provenance.store.corpora import CorpusStore

    pool = await _with_pool(settings)
    try:
        report = await ingest(
            CorpusStore(pool),
            directory,
            lambda: load_embedder(settings, for_ingest=True),
            settings.embedding.model,
            settings.ingest.chunk_max_tokens,
            settings.retrieval.hnsw_min_passages,
            force=force,
            corpus=corpus,
            replace=replace,
        )
        return report.summary()
    finally:
        await pool.close()


async def _corpus_state(settings: Settings, name: str) -> CorpusState | None:
    from provenance.store.corpora import CorpusStore

    pool = await _with_pool(settings)
    try:
        return await CorpusStore(pool).corpus_state(name)
    finally:
        await pool.close()


async def _corpus_folder(settings: Settings, name: str) -> Path | None:
    state = await _corpus_state(settings, name)
    return Path(state.source_dir) if state and state.source_dir else None


async def _keys(settings: Settings, args: argparse.Namespace) -> int:
    from provenance.access.commands import CommandMistake, check_key_arguments, keys

    try:
        check_key_arguments(args)  # before the database is opened
        pool = await _with_pool(settings)
        try:
            return await keys(pool, args)
        finally:
            await pool.close()
    except CommandMistake as exc:
        raise Mistake(str(exc)) from None


async def _create_corpus(settings: Settings, args: argparse.Namespace) -> int:
    from provenance.access.commands import CommandMistake, check_corpus_name, create_corpus

    try:
        check_corpus_name(args.name)
        pool = await _with_pool(settings)
        try:
            return await create_corpus(pool, args.name, args.private, args.title)
        finally:
            await pool.close()
    except CommandMistake as exc:
        raise Mistake(str(exc)) from None


async def _warm_cache(settings: Settings, only: str | None) -> int:
    import uuid

    from provenance.guards.postgres import OperatorGuards
    from provenance.services import build_services

    if settings.guards.cache_ttl_s <= 0:
        raise Mistake("CACHE_TTL_S is 0, so nothing would be cached")
    if only is not None and await _corpus_state(settings, only) is None:
        raise Mistake(f"there is no corpus named {only!r}")
    # The operator's own run: the cache and spend cap apply, the bot check and rate limit don't.
    services = await build_services(settings, guards=OperatorGuards)
    failed = 0
    try:
        # The questions the page offers: each served corpus's examples (see GET /corpora).
        corpora = [c for c in await services.store.corpora() if only is None or c.name == only]
        if only is not None and not corpora:  # removed meanwhile
            raise Mistake(f"there is no corpus named {only!r}")
        todo = [(c.name, str(e["question"])) for c in corpora for e in c.examples]
        if not todo:
            print("no example questions to warm: ingest a corpus first", file=sys.stderr)
        for corpus, question in todo:
            outcome = await services.pipeline.ask(question, request_id=f"warm-{uuid.uuid4().hex[:12]}", corpus=corpus)
            r = outcome.response
            if r.cached:
                how = "already cached"
            elif r.status == "blocked":
                how = f"{r.reason}; not cached"
                failed += 1
            else:
                how = f"cached now, {r.total_ms:.0f} ms"
            print(f"{r.status:<8} ({how}) {corpus}: {question}", flush=True)
    finally:
        await services.close()
    return 1 if failed else 0


def _usage(parser: argparse.ArgumentParser) -> Callable[[argparse.Namespace], int]:
    """For a command group run without its action: its help, not argparse's "arguments are required: x"."""

    def show(args: argparse.Namespace) -> int:
        parser.print_help(sys.stderr)
        return 2

    return show


async def _fill_sentences(settings: Settings) -> int:
    """Compute, once, the sentence and word vectors a database ingested before they were stored lacks."""
    from provenance.ingest.folder import fill_missing_sentences
    from provenance.services import load_embedder
    from provenance.store.corpora import CorpusStore

    pool = await _with_pool(settings)
    try:
        return await fill_missing_sentences(
            CorpusStore(pool), lambda: load_embedder(settings, for_ingest=True), settings.embedding.model
        )
    finally:
        await pool.close()


def _fill_sentences_now(settings: Settings) -> None:
    filled = asyncio.run(_fill_sentences(settings))
    if filled:
        print(f"computed the sentence vectors of {filled} stored passages (once; they are stored now)", flush=True)


async def _list_corpora(settings: Settings) -> int:
    from provenance.store.corpora import CorpusStore

    pool = await _with_pool(settings)
    try:
        corpora = await CorpusStore(pool).corpora()
    finally:
        await pool.close()
    if not corpora:
        print("no corpora: `provenance ingest DIR --corpus NAME` adds one")
        return 0
    rows = [("NAME", "PASSAGES", "MODEL", "VERSION", "INGESTED", "FOLDER")] + [
        (
            c.name,
            str(c.passage_count),
            c.embedding_model,
            c.version,
            f"{c.ingested_at:%Y-%m-%d %H:%M}",
            c.source_dir or "(not recorded)",
        )
        for c in corpora
    ]
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]) - 1)]
    for r in rows:
        print("  ".join([*(v.ljust(w) for v, w in zip(r, widths, strict=False)), r[-1]]).rstrip())
    return 0


async def _remove_corpus(settings: Settings, name: str, yes: bool, force: bool) -> int:
    from provenance.access.store import AccessStore
    from provenance.store.corpora import CorpusStore

    if name == DEFAULT_CORPUS and not force:
        raise Mistake(
            f"{DEFAULT_CORPUS!r} is what `provenance serve --ingest` serves (and ingests again from "
            "CORPUS_DIR); pass --force to remove it anyway"
        )
    pool = await _with_pool(settings)
    try:
        store = CorpusStore(pool)
        access = AccessStore(pool)
        state = await store.corpus_state(name)
        if state is None and await access.forget_corpus(name):
            print(f"removed corpus {name}: it held no documents yet")
            return 0
        if state is None:
            known = ", ".join(c.name for c in await store.corpora()) or "none"
            raise Mistake(f"there is no corpus named {name!r} (corpora: {known})")
        if not yes:
            folder = state.source_dir or "an unrecorded folder"
            prompt = (
                f"remove corpus {name} ({state.passage_count} passages from {folder}) with its sentence vectors "
                "and cached answers? [y/N] "
            )
            try:
                answer = await asyncio.to_thread(input, prompt)
            except EOFError:
                answer = ""
            if answer.strip().lower() not in ("y", "yes"):
                print("nothing removed", file=sys.stderr)
                return 1
        removed = await store.remove_corpus(name)
        # Its visibility and the grants on it go with it: a corpus made later under the name starts afresh.
        await access.forget_corpus(name)
    finally:
        await pool.close()
    if removed is None:  # removed by someone else meanwhile
        raise Mistake(f"there is no corpus named {name!r}")
    print(
        f"removed corpus {name}: {removed.passages} passages, {removed.sentences} sentence vectors, "
        f"{removed.cached_answers} cached answers"
    )
    return 0


def _check_corpus_name(name: str) -> None:
    from provenance.wire import valid_name

    if not valid_name(name):
        raise Mistake(
            f"corpus name {name!r}: use 1-40 lowercase letters, digits, '-' or '_', starting with a letter or digit"
        )


def cmd_corpora(args: argparse.Namespace) -> int:
    settings = _settings()
    if args.corpora_command == "remove":
        return asyncio.run(_remove_corpus(settings, args.name, args.yes, args.force))
    if args.corpora_command == "create":
        return asyncio.run(_create_corpus(settings, args))
    return asyncio.run(_list_corpora(settings))


def cmd_keys(args: argparse.Namespace) -> int:
    if args.keys_command is None:
        result: int = args.usage(args)
        return result
    return asyncio.run(_keys(_settings(), args))


def cmd_sources(args: argparse.Namespace) -> int:
    from provenance.access.commands import CommandMistake
    from provenance.services import load_embedder
    from provenance.sources.commands import sources

    if args.sources_command is None:
        return int(args.usage(args))
    settings = _settings()

    async def run() -> int:
        pool = await _with_pool(settings)
        try:
            return await sources(pool, settings, args, lambda: load_embedder(settings, for_ingest=True))
        finally:
            await pool.close()

    try:
        return asyncio.run(run())
    except CommandMistake as exc:
        raise Mistake(str(exc)) from None


def cmd_warm_cache(args: argparse.Namespace) -> int:
    return asyncio.run(_warm_cache(_settings(), args.corpus))


def cmd_db_migrate(args: argparse.Namespace) -> int:
    settings = _settings()
    applied = asyncio.run(_migrate(settings))
    print("applied: " + ", ".join(applied) if applied else "database is up to date")
    _fill_sentences_now(settings)
    return 0


def cmd_ingest(args: argparse.Namespace) -> int:
    settings = _settings()
    bound_allocator()
    directory = Path(args.dir) if args.dir else settings.ingest.corpus_dir
    _check_corpus_name(args.corpus)
    if not directory.is_dir():
        raise Mistake(f"corpus folder not found: {directory}")
    print(asyncio.run(_ingest(settings, directory, args.force, args.corpus, args.replace)))
    return 0


# glibc's mallopt parameters (malloc.h): the size from which a block is its own mmap, and the most arenas.
M_MMAP_THRESHOLD = -3
M_ARENA_MAX = -8
# glibc's default threshold, fixed: a block this large or larger is mapped, and unmapped when freed.
INGEST_MMAP_THRESHOLD = 128 * 1024


def bound_allocator(arenas: int = 2, mmap_threshold: int = INGEST_MMAP_THRESHOLD) -> bool:
    """Keep glibc malloc from holding what an ingest's embedding batches freed; False off glibc. For the
    one-shot ingest command only; the server keeps glibc's defaults.

    - The mmap threshold, fixed. By default glibc raises it to the size of each mapped block freed (up to
      32 MiB), so after onnxruntime's first batch its activations (24 MiB each at 32 x 128 tokens: 32 x 12
      heads x 128 x 128 floats) are carved from the heap instead, where the freed ones fragment and stay
      resident: one session run of 32 x 128 tokens peaked 570 MiB above the loaded session, against 100 MiB
      with the threshold fixed (setting it at all turns the adjustment off). Mapping each costs page faults,
      a few per cent of a run.
    - At most `arenas` arenas. glibc gives each allocating thread an arena of its own and keeps what each
      held at its peak: onnxruntime's threads kept 128 MiB more resident over an ingest."""
    try:
        libc = ctypes.CDLL("libc.so.6")
    except OSError:
        return False
    return bool(libc.mallopt(M_MMAP_THRESHOLD, mmap_threshold)) and bool(libc.mallopt(M_ARENA_MAX, arenas))


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
    import uvicorn

    from provenance.http.uvicorn_protocols import http_protocol

    settings = _settings()
    made = _metrics_dir() if settings.metrics.enabled else None
    if made is not None:
        atexit.register(shutil.rmtree, made, ignore_errors=True)
    host = args.host or settings.server.host
    port = args.port or settings.server.port
    if settings.database.url is None:
        # Start the embedded server here, in the parent, so that every worker joins one Postgres and
        # Ctrl-C on this process stops it cleanly.
        from provenance.store.embedded_pg import start_embedded

        os.environ["DATABASE_URL"] = start_embedded(settings.pg_data_dir)
        settings = _settings()
    if args.ingest:
        from provenance.errors import CorpusConflict

        try:
            print(asyncio.run(_ingest(settings, settings.ingest.corpus_dir, False, DEFAULT_CORPUS)), flush=True)
        except CorpusConflict as exc:
            # Someone put another folder in the default corpus on purpose (--replace): serve it, say so.
            print(f"not ingesting {settings.ingest.corpus_dir}: {exc}", flush=True)
    else:
        asyncio.run(_migrate(settings))
    # A database ingested before sentence vectors were stored gets them now, once, with a progress bar,
    # rather than each worker embedding them at every start.
    _fill_sentences_now(settings)
    print(f"serving on http://{host}:{port} (profile {settings.profile}); Ctrl-C stops", flush=True)
    uvicorn.run(
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
        timeout_keep_alive=5,
        timeout_graceful_shutdown=5,
    )
    return 0


class _EvalsRun:
    """What `provenance evals` runs on, every part checked before any work."""

    def __init__(self, args: argparse.Namespace) -> None:
        from provenance.evaluation.cases import load_cases
        from provenance.evaluation.runner import K_SWEEP

        self.settings = _settings()
        if args.profile:
            self.settings = self.settings.with_overrides(profile=args.profile)
        if self.settings.profile == "anthropic" and not self.settings.anthropic.api_key:
            raise Mistake("--profile anthropic needs ANTHROPIC_API_KEY")
        if self.settings.profile == "openai" and not self.settings.openai.model:
            raise Mistake("--profile openai needs OPENAI_MODEL (and OPENAI_BASE_URL for your server)")
        self.corpus, self.name = self._corpus(args)
        own_cases = self.corpus / "cases.jsonl"
        default_cases = own_cases if own_cases.exists() else self.corpus.parent / "evals" / "cases.jsonl"
        self.cases = Path(args.cases) if args.cases else default_cases
        if not self.cases.is_file():
            raise Mistake(f"no cases file at {self.cases} (a corpus's own go in its folder, as cases.jsonl)")
        try:
            load_cases(self.cases)  # read again by the run; a case left for review stops it here
        except (ValueError, UnicodeDecodeError, msgspec.DecodeError) as exc:
            raise Mistake(str(exc).splitlines()[0]) from None
        try:
            self.k_sweep = tuple(int(k) for k in args.k_sweep.split(",")) if args.k_sweep else K_SWEEP
        except ValueError:
            raise Mistake(f"--k-sweep takes comma-separated whole numbers, got {args.k_sweep!r}") from None
        default_out = "results.md" if self.name == DEFAULT_CORPUS else f"results-{self.name}.md"
        self.out = Path(args.out) if args.out else Path("evals") / default_out
        shown_name = self.name if self.name != DEFAULT_CORPUS else self.corpus.resolve().name
        self.title = args.title or f"Evals: {shown_name}"

    def _corpus(self, args: argparse.Namespace) -> tuple[Path, str]:
        from provenance.wire import valid_name

        corpus = Path(args.corpus) if args.corpus else self.settings.ingest.corpus_dir
        if args.corpus and not corpus.is_dir() and valid_name(args.corpus):
            # A stored corpus: its evals run over the folder it was ingested from, with that folder's cases.
            folder = asyncio.run(_corpus_folder(self.settings, args.corpus))
            if folder is None:
                raise Mistake(f"{args.corpus!r} is neither a folder nor a corpus ingested from one")
            return folder, args.corpus
        if not corpus.is_dir():
            raise Mistake(f"corpus folder not found: {corpus}")
        return corpus, DEFAULT_CORPUS  # a folder given as such keeps today's report names


def _conversation_evals(args: argparse.Namespace) -> int:
    """`provenance evals --conversations FILE`: the conversation suite (provenance.evaluation.conversations)."""
    from provenance.evaluation.conversations import run_suite
    from provenance.services import build_profile, load_embedder

    settings = _settings()
    if args.profile:
        settings = settings.with_overrides(profile=args.profile)
    if settings.profile == "anthropic" and not settings.anthropic.api_key:
        raise Mistake("--profile anthropic needs ANTHROPIC_API_KEY")
    if settings.profile == "openai" and not settings.openai.model:
        raise Mistake("--profile openai needs OPENAI_MODEL (and OPENAI_BASE_URL for your server)")
    suite = Path(args.conversations)
    if not suite.is_file():
        raise Mistake(f"no conversation suite at {suite}")
    embedder = load_embedder(settings)
    out = Path(args.out) if args.out else Path("evals") / f"results-conversations-{settings.profile}.md"
    followed, alone = asyncio.run(run_suite(settings, suite, out, embedder, build_profile(settings, embedder)))
    print(
        f"follow-ups answered correctly {followed.answered_correctly}, standalone {alone.answered_correctly};"
        f" fabrication {followed.fabrication} vs {alone.fabrication}; recall {followed.recall} vs {alone.recall}"
        f" -> {out}"
    )
    return 0


def cmd_evals(args: argparse.Namespace) -> int:
    from provenance.evaluation.runner import run_evals
    from provenance.services import build_profile, load_embedder

    if args.conversations:
        return _conversation_evals(args)
    run = _EvalsRun(args)
    embedder = load_embedder(run.settings)
    profile = build_profile(run.settings, embedder)
    json_out = Path(args.json) if args.json else None
    _, score = asyncio.run(
        run_evals(
            run.settings,
            run.corpus,
            run.cases,
            run.out,
            json_out,
            embedder,
            profile,
            run.title,
            k_sweep=run.k_sweep,
            resume=args.resume,
        )
    )
    fab = "n/a" if score.fabrication_rate is None else f"{100 * score.fabrication_rate:.1f}%"
    fr = "n/a" if score.false_refusal_rate is None else f"{100 * score.false_refusal_rate:.1f}%"
    ac = "n/a" if score.answered_correctly is None else f"{100 * score.answered_correctly:.1f}%"
    rec = "n/a" if score.recall is None else f"{100 * score.recall:.1f}%"
    print(
        f"{score.n} cases: fabrication {fab}, false refusal {fr}, accuracy {100 * score.accuracy:.1f}%, "
        f"answered correctly {ac}, recall@k {rec}"
    )
    print(f"report: {run.out}")
    return 0


async def _feedback(settings: Settings, args: argparse.Namespace) -> int:
    from provenance.feedback import cases
    from provenance.store import Store

    try:
        since = cases.parse_since(args.since) if args.since else None
    except ValueError as exc:
        raise Mistake(str(exc)) from None
    pool = await _with_pool(settings)
    try:
        store = Store(pool)
        if args.feedback_command == "export":
            print(await cases.export(store, settings, Path(args.out), since, args.corpus))
        else:
            print(await cases.stats(store, since, args.corpus))
    finally:
        await pool.close()
    return 0


def cmd_feedback(args: argparse.Namespace) -> int:
    if args.feedback_command is None:
        result: int = args.usage(args)
        return result
    return asyncio.run(_feedback(_settings(), args))


def _feedback_parser(sub: Any) -> None:
    feedback = sub.add_parser("feedback", help='readers\' "Was this right?" verdicts: counts, and eval cases')
    feedback_sub = feedback.add_subparsers(dest="feedback_command", metavar="ACTION")
    export = feedback_sub.add_parser(
        "export", help="write the 'wrong' verdicts as eval cases for review (provenance evals --cases reads them)"
    )
    stats = feedback_sub.add_parser("stats", help="verdicts by verdict and kind, per corpus and per week")
    for action in (export, stats):
        action.add_argument("--since", default=None, metavar="DATE", help="only verdicts given since (UTC)")
        action.add_argument("--corpus", default=None, metavar="NAME", help="only verdicts on this corpus")
    export.add_argument("--out", required=True, metavar="FILE.jsonl", help="the cases file to write")
    feedback.set_defaults(func=cmd_feedback, usage=_usage(feedback))


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="provenance",
        description=DESCRIPTION,
        epilog=EPILOG.format(formats=_formats()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", title="commands", metavar="COMMAND")
    for add in (
        _serve_parser,
        _db_parser,
        _keys_parser,
        _warm_parser,
        _ingest_parser,
        _corpora_parser,
        _sources_parser,
        _evals_parser,
        _feedback_parser,
    ):
        add(sub)
    return parser


def _serve_parser(sub: Any) -> None:
    serve = sub.add_parser("serve", help="run the HTTP API and the web page")
    serve.add_argument("--host", default=None, help="bind address (default: HOST or 127.0.0.1)")
    serve.add_argument("--port", type=int, default=None, help="port (default: PORT or 8000)")
    serve.add_argument("--workers", type=int, default=1, help="uvicorn worker processes")
    serve.add_argument("--ingest", action="store_true", help="ingest CORPUS_DIR first when it changed")
    # httptools and uvloop are installed with us and chosen by "auto"; the others are for comparing.
    serve.add_argument("--http", choices=["auto", "h11", "httptools"], default="auto", help=argparse.SUPPRESS)
    serve.add_argument("--loop", choices=["auto", "asyncio", "uvloop"], default="auto", help=argparse.SUPPRESS)
    serve.set_defaults(func=cmd_serve)


def _db_parser(sub: Any) -> None:
    db = sub.add_parser("db", help="database maintenance")
    db_sub = db.add_subparsers(dest="db_command", metavar="ACTION")
    db.set_defaults(func=_usage(db))
    migrate = db_sub.add_parser("migrate", help="apply pending migrations from db/migrations")
    migrate.set_defaults(func=cmd_db_migrate)


def _keys_parser(sub: Any) -> None:
    keys = sub.add_parser("keys", help="API keys for clients without a browser (Authorization: Bearer)")
    keys_sub = keys.add_subparsers(dest="keys_command", metavar="ACTION")
    from provenance.access.commands import add_key_arguments

    add_key_arguments(keys_sub)
    keys.set_defaults(func=cmd_keys, usage=_usage(keys))


def _sources_parser(sub: Any) -> None:
    from provenance.sources.commands import add_source_arguments

    sources = sub.add_parser("sources", help="sites crawled into a corpus: add, list, remove, sync")
    add_source_arguments(sources.add_subparsers(dest="sources_command", metavar="ACTION"))
    sources.set_defaults(func=cmd_sources, usage=_usage(sources))


def _warm_parser(sub: Any) -> None:
    warm = sub.add_parser("warm-cache", help="answer each corpus's example questions now so they are cached")
    warm.add_argument("--corpus", default=None, help="only this corpus's examples (default: every corpus's)")
    warm.set_defaults(func=cmd_warm_cache)


def _ingest_parser(sub: Any) -> None:
    ingest = sub.add_parser("ingest", help=f"chunk, embed and store a folder of documents ({_formats()})")
    ingest.add_argument("dir", nargs="?", default=None, help="folder to ingest (default: CORPUS_DIR or corpus/)")
    ingest.add_argument("--force", action="store_true", help="re-embed every passage")
    ingest.add_argument(
        "--corpus",
        default=DEFAULT_CORPUS,
        metavar="NAME",
        help="the corpus to ingest into, kept beside the others (default: default, what `serve --ingest` serves)",
    )
    ingest.add_argument(
        "--replace",
        action="store_true",
        help="let DIR replace a corpus that was ingested from another folder (says what it removed)",
    )
    ingest.set_defaults(func=cmd_ingest)


def _corpora_parser(sub: Any) -> None:
    corpora = sub.add_parser("corpora", help="list the corpora (folder, passages, model, version, ingest time)")
    corpora_sub = corpora.add_subparsers(dest="corpora_command", metavar="ACTION")
    corpora_sub.add_parser("list", help="the same as `provenance corpora`")
    create = corpora_sub.add_parser("create", help="create a corpus before adding documents; public unless --private")
    create.add_argument("name", help="lowercase letters, digits, _ and -")
    create.add_argument("--private", action="store_true", help="only keys granted it (and admins) can see it")
    create.add_argument("--title", default=None, help="what the page calls it (default: from its documents)")
    remove = corpora_sub.add_parser(
        "remove", help="remove a corpus: its passages, their sentence vectors and its cached answers"
    )
    remove.add_argument("name", help="the corpus, as `provenance corpora` lists it")
    remove.add_argument("--yes", action="store_true", help="remove without asking")
    remove.add_argument("--force", action="store_true", help=f"needed to remove {DEFAULT_CORPUS!r}")
    corpora.set_defaults(func=cmd_corpora)


def _evals_parser(sub: Any) -> None:
    evals = sub.add_parser("evals", help="run eval cases through the pipeline and write a scorecard")
    evals.add_argument(
        "--corpus",
        default=None,
        help="a folder, or the name of an ingested corpus (its folder); ingested into an isolated schema "
        "(default: corpus/)",
    )
    evals.add_argument(
        "--cases", default=None, help="cases JSONL (default: the corpus folder's cases.jsonl, else evals/cases.jsonl)"
    )
    evals.add_argument("--profile", choices=["local", "anthropic", "openai"], default=None)
    evals.add_argument(
        "--out", default=None, help="Markdown report (default: evals/results.md, results-NAME.md for a named corpus)"
    )
    evals.add_argument(
        "--json", default=None, help="also write one JSON record per case here, each as soon as the case is done"
    )
    evals.add_argument(
        "--resume",
        action="store_true",
        help="keep the cases already recorded in --json's file and ask only the rest (a stopped run carries on)",
    )
    evals.add_argument("--title", default=None, help="report title")
    evals.add_argument(
        "--conversations",
        default=None,
        help="a conversation suite (evals/conversations.jsonl): follow-ups beside their standalone questions",
    )
    evals.add_argument("--k-sweep", default=None, help="comma-separated k values to sweep (default 2,4,6,8)")
    evals.set_defaults(func=cmd_evals)


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        # argparse's own "the following arguments are required: command" tells a newcomer nothing.
        parser.print_help(sys.stderr)
        return 2
    try:
        result: int = args.func(args)
        return result
    except (Mistake, ConfigurationError) as exc:
        # ConfigurationError too: a folder with nothing readable, a model file missing, a corpus conflict.
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
