"""API keys for clients without a browser: `Authorization: Bearer <key>` instead of a Turnstile token.

Only a SHA-256 of each key is stored. Keys are 256 random bits, so a plain (unsalted, fast) hash is
enough: there is no dictionary to attack, and the hash must be cheap because it runs on every request.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Sequence

import msgspec

from provenance.access.clients import Client, Role
from provenance.access.store import AccessStore, KeyRow
from provenance.store.guards import GuardStore

KEY_PREFIX = "pv_"
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


class KeyCheck(msgspec.Struct, frozen=True):
    ok: bool
    detail: str
    name: str | None = None
    # What the key may read and write, as of this request; None for a refused key.
    client: Client | None = None


def new_key() -> str:
    return KEY_PREFIX + secrets.token_urlsafe(32)


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def bearer_token(authorization: str | None) -> str | None:
    """The key from `Bearer <key>`; None for no header or another scheme.

    Another scheme (say Basic, from a password-protected staging site) is not ours to judge, so the
    request falls through to the Turnstile check rather than being refused as a bad key.
    """
    if not authorization:
        return None
    scheme, _, value = authorization.strip().partition(" ")
    if scheme.lower() != "bearer":
        return None
    return value.strip()


async def check_key(store: AccessStore, key: str) -> KeyCheck:
    if not key:
        return KeyCheck(False, "the Authorization header has an empty Bearer key")
    row = await store.key_by_hash(hash_key(key))
    if row is None:
        return KeyCheck(False, "unknown API key")
    if row.revoked_at is not None:
        return KeyCheck(False, f"the API key {row.name!r} was revoked", row.name)
    return KeyCheck(True, f"API key {row.name!r}", row.name, row.client)


def valid_name(name: str) -> bool:
    return NAME_PATTERN.fullmatch(name) is not None


async def create_key(
    store: AccessStore | GuardStore, name: str, role: Role = "reader", corpora: Sequence[str] = ()
) -> str | None:
    """A new key for `name`, granted `corpora`, or None when the name is taken. The key itself is never
    stored."""
    access = store if isinstance(store, AccessStore) else AccessStore(store.pool, store.acquire_timeout_s)
    key = new_key()
    return key if await access.create_key(name, hash_key(key), role, corpora) else None


async def list_keys(store: AccessStore) -> list[KeyRow]:
    return await store.keys()
