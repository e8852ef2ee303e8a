"""A client as the access rules see it, and the rules themselves.

A corpus a client may not read does not exist for it: every refusal to read is the same `404 unknown_corpus`
a name that exists nowhere gets, listing only the corpora the client can see. Only a client that may read a
corpus learns that it may not write to it (`403 forbidden`).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal, get_args

import msgspec

from provenance.errors import ServiceError, UnknownCorpus

Role = Literal["reader", "editor", "admin"]
# What a grant can give on one corpus: admin is a key's, over every corpus.
GrantRole = Literal["reader", "editor"]
ROLES: tuple[str, ...] = get_args(Role)
GRANT_ROLES: tuple[str, ...] = get_args(GrantRole)
Visibility = Literal["public", "private"]


class Client(msgspec.Struct, frozen=True):
    """Who asks, and the private corpora as of this request (read with the key, so a grant taken away or a
    corpus made private holds from the next request on)."""

    # The key's name; None for the page (Turnstile, or no bot check configured) and the operator.
    key: str | None = None
    role: Role | None = None
    grants: dict[str, GrantRole] = msgspec.field(default_factory=dict)
    private: frozenset[str] = frozenset()
    # Commands run on the server itself (evals, warm-cache): whoever runs them can read the database anyway.
    operator: bool = False

    @property
    def admin(self) -> bool:
        return self.operator or self.role == "admin"

    def reads(self, corpus: str) -> bool:
        return self.admin or corpus not in self.private or corpus in self.grants

    def writes(self, corpus: str) -> bool:
        return self.admin or self.grants.get(corpus) == "editor"

    def visible(self, names: Iterable[str]) -> list[str]:
        return sorted(n for n in names if self.reads(n))


OPERATOR = Client(operator=True)


class Forbidden(ServiceError):
    """403: the client may see what it asked to change, and may not change it."""

    def __init__(self, message: str) -> None:
        super().__init__(403, "forbidden", message)


def require_read(client: Client, corpus: str, existing: Iterable[str]) -> None:
    """Refuse a corpus that doesn't exist, or that this client may not read, in the same words."""
    names = set(existing)
    if corpus not in names or not client.reads(corpus):
        raise UnknownCorpus(corpus, client.visible(names))


def require_write(client: Client, corpus: str, existing: Iterable[str]) -> None:
    require_read(client, corpus, existing)
    if not client.writes(corpus):
        who = f"the API key {client.key!r}" if client.key else "a client without an API key"
        raise Forbidden(f"{who} may read corpus {corpus!r} but not change it (an editor's grant on it is needed)")


def require_admin(client: Client) -> None:
    if not client.admin:
        who = f"the API key {client.key!r}" if client.key else "a client without an API key"
        raise Forbidden(f"{who} is not an admin: only an admin key creates and removes corpora")
