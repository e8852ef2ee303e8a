"""`provenance keys ...` and `provenance corpora create`: the operator's side of who may read what. Each takes
the parsed arguments and an open pool, prints what it did, and returns the exit status."""

from __future__ import annotations

import argparse
import sys

import asyncpg

from provenance.access.clients import GRANT_ROLES, ROLES, GrantRole, Visibility
from provenance.access.store import AccessStore
from provenance.guards.apikeys import create_key, list_keys, valid_name
from provenance.store.corpora import CorpusStore
from provenance.store.guards import GuardStore
from provenance.wire import valid_name as valid_corpus_name


def add_key_arguments(keys_sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    create = keys_sub.add_parser("create", help="create a key and print it once")
    create.add_argument("name", help="who the key is for (letters, digits, . _ -)")
    create.add_argument(
        "--role",
        choices=ROLES,
        default="reader",
        help="reader: asks and rates answers; editor: also adds and removes documents in its corpora;"
        " admin: everything, every corpus (default: reader)",
    )
    create.add_argument(
        "--corpus",
        action="append",
        default=[],
        metavar="C",
        help="a corpus it is granted, at its role (repeat for more); public corpora need none to be read",
    )
    grant = keys_sub.add_parser("grant", help="give a key a right on one corpus")
    grant.add_argument("name")
    grant.add_argument("--corpus", required=True, metavar="C")
    grant.add_argument("--role", choices=GRANT_ROLES, default=None, help="(default: the key's own, at most editor)")
    ungrant = keys_sub.add_parser("ungrant", help="take a key's right on one corpus away")
    ungrant.add_argument("name")
    ungrant.add_argument("--corpus", required=True, metavar="C")
    revoke = keys_sub.add_parser("revoke", help="end a key; its name stays taken")
    revoke.add_argument("name")
    keys_sub.add_parser("list", help="names, roles, grants, created and revoked times (never the keys)")


class CommandMistake(Exception):
    """A user's mistake: the command line prints it as one line and exits 2 (provenance.cli.common.Mistake)."""


def check_corpus_name(name: str) -> None:
    if not valid_corpus_name(name):
        raise CommandMistake(f"{name!r} is not a corpus name (1-40 lowercase letters, digits, '_' or '-')")


def check_key_arguments(args: argparse.Namespace) -> None:
    """What can be refused before the database is opened."""
    name: str | None = getattr(args, "name", None)
    if name is not None and not valid_name(name):
        raise CommandMistake("a key name is 1-64 letters, digits, '.', '_' or '-'")
    for corpus in _corpora_named(args):
        check_corpus_name(corpus)


def _corpora_named(args: argparse.Namespace) -> list[str]:
    if args.keys_command == "create":
        return list(getattr(args, "corpus", None) or [])
    if args.keys_command in ("grant", "ungrant"):
        return [args.corpus]
    return []


async def keys(pool: asyncpg.Pool, args: argparse.Namespace) -> int:
    store = AccessStore(pool)
    action: str = args.keys_command
    name: str | None = getattr(args, "name", None)
    corpora = _corpora_named(args)
    if action == "create" and name is not None:
        key = await create_key(store, name, args.role, corpora)
        if key is None:
            raise CommandMistake(f"a key named {name!r} already exists (revoked names stay taken)")
        # The key alone on stdout, so `KEY=$(provenance keys create NAME)` works; only its hash is kept.
        granted = f", granted {', '.join(corpora)}" if corpora else ""
        print(
            f"created API key {name!r} ({args.role}{granted}); it is shown only now, so store it safely",
            file=sys.stderr,
        )
        print(key)
        return 0
    if action == "grant" and name is not None:
        row = await store.key(name)
        if row is None or row.revoked_at is not None:
            raise CommandMistake(f"no active key named {name!r}")
        role: GrantRole = args.role or ("reader" if row.role == "reader" else "editor")
        await store.grant(name, args.corpus, role)
        print(f"granted {name!r} {role} on corpus {args.corpus}")
        return 0
    if action == "ungrant" and name is not None:
        if not await store.ungrant(name, args.corpus):
            raise CommandMistake(f"{name!r} has no grant on corpus {args.corpus!r}")
        print(f"took {name!r}'s grant on corpus {args.corpus} away")
        return 0
    if action == "revoke" and name is not None:
        if not await GuardStore(pool).revoke_api_key(name):
            raise CommandMistake(f"no active key named {name!r}")
        print(f"revoked API key {name!r}")
        return 0
    rows = await list_keys(store)
    if not rows:
        print("no API keys")
    for row in rows:
        revoked = f"revoked {row.revoked_at:%Y-%m-%d %H:%M}" if row.revoked_at else "active"
        grants = ", ".join(f"{c} ({r})" for c, r in sorted(row.grants.items())) or "-"
        print(f"{row.name}\t{row.role}\tcreated {row.created_at:%Y-%m-%d %H:%M}\t{revoked}\tgrants: {grants}")
    return 0


async def create_corpus(pool: asyncpg.Pool, name: str, private: bool, title: str | None) -> int:
    check_corpus_name(name)
    exists = await CorpusStore(pool).corpus_state(name) is not None
    visibility: Visibility = "private" if private else "public"
    if not await AccessStore(pool).create_corpus(name, visibility, title or "", exists=exists):
        raise CommandMistake(f"corpus {name!r} exists already; a corpus's visibility is chosen when it is created")
    print(f"created {visibility} corpus {name}; `provenance ingest DIR --corpus {name}` adds documents to it")
    return 0
