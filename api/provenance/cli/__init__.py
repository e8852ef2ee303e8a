"""The `provenance` command. Each subcommand prints its result on stdout and nothing else: errors go to
stderr, and the embedded Postgres's own account of starting goes to a log file under the data folder.

A command group is a module with `add(sub)`, which declares its parser and sets `func`; adding one is a line in
COMMANDS, in the order `provenance --help` lists them."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from provenance.cli import common, corpora, db, evals, feedback, ingest, keys, serve, sources, warm
from provenance.cli.common import Mistake
from provenance.errors import ConfigurationError
from provenance.jobs.commands import add_worker_parser

COMMANDS: tuple[Callable[[common.Subparsers], None], ...] = (
    serve.add,
    db.add,
    keys.add,
    warm.add,
    ingest.add,
    corpora.add,
    sources.add,
    evals.add,
    feedback.add,
    add_worker_parser,
)

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


def build_parser() -> argparse.ArgumentParser:
    parser = common.Parser(
        prog="provenance",
        description=DESCRIPTION,
        epilog=EPILOG.format(formats=common.formats()),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = parser.add_subparsers(dest="command", title="commands", metavar="COMMAND")
    for add in COMMANDS:
        add(sub)
    return parser


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
