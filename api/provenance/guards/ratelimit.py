"""Per-client hourly fixed-window rate limit, counted in Postgres so every worker shares one count."""

from __future__ import annotations

import ipaddress
import math
from collections.abc import Iterable, Mapping
from functools import lru_cache

from provenance.errors import ServiceError
from provenance.guards.base import Ticket
from provenance.guards.sweep import Sweeper
from provenance.logs import get_logger
from provenance.store.guards import GuardStore
from provenance.timing import Timer
from provenance.wire import RateLimitStage

log = get_logger("provenance.guards.ratelimit")

IPNetwork = ipaddress.IPv4Network | ipaddress.IPv6Network
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

# Windows are an hour long; anything two hours old can no longer be counted against.
CLEANUP_OLDER_THAN_S = 2 * 3600
CLEANUP_EVERY_S = 600.0


def parse_networks(entries: Iterable[str]) -> tuple[IPNetwork, ...]:
    return tuple(ipaddress.ip_network(entry, strict=False) for entry in entries)


@lru_cache(maxsize=4096)  # every request parses its peer's address, and clients come back
def _parse_ip(text: str) -> IPAddress | None:
    text = text.strip().strip('"')
    if text.startswith("["):  # "[2001:db8::1]:443"
        text = text[1:].partition("]")[0]
    elif text.count(":") == 1:  # "203.0.113.7:5123"
        text = text.partition(":")[0]
    try:
        ip = ipaddress.ip_address(text)
    except ValueError:
        return None
    # An IPv4 client seen through an IPv6 socket is still that IPv4 client.
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        return ip.ipv4_mapped
    return ip


def _trusted(ip: IPAddress, proxies: tuple[IPNetwork, ...]) -> bool:
    return any(ip.version == net.version and ip in net for net in proxies)


def client_ip(peer_ip: str | None, headers: Mapping[str, str], proxies: tuple[IPNetwork, ...]) -> str:
    """The address to hold responsible for a request.

    X-Forwarded-For is anyone's to write, so it is believed only when the socket peer is one of our
    proxies. Each proxy appends the address it saw, so the right-most entry that is not one of ours is
    the first hop we did not run: the client, as far as we can know. Entries left of it are unverifiable.
    """
    peer = _parse_ip(peer_ip) if peer_ip else None
    if peer is None:
        return peer_ip or "unknown"
    if not proxies or not _trusted(peer, proxies):
        return str(peer)
    forwarded = headers.get("x-forwarded-for", "")
    hops = [part for part in forwarded.split(",") if part.strip()]
    candidate = peer
    for part in reversed(hops):
        ip = _parse_ip(part)
        if ip is None:
            # Our own proxy wrote garbage: the nearest address we can vouch for is the last one.
            break
        candidate = ip
        if not _trusted(ip, proxies):
            break
    return str(candidate)


def rate_limit_key(client_key: str) -> tuple[str, bool]:
    """(key to count under, is it an API key). IPv6 clients are counted per /64, which is what one
    subscriber usually gets: counting single addresses would let one client rotate through 2^64 of them."""
    if client_key.startswith("key:"):
        return client_key, True
    ip = _parse_ip(client_key)
    if isinstance(ip, ipaddress.IPv6Address):
        return f"ip:{ipaddress.ip_network(f'{ip}/64', strict=False)}", False
    return f"ip:{ip if ip is not None else client_key}", False


def human_duration(seconds: float) -> str:
    """'45 seconds', '1 minute', '36 minutes', '1 hour': rounded up, so a client told to wait that long
    is not refused again."""
    s = max(1, math.ceil(seconds))
    if s < 60:
        return f"{s} second{'s' if s != 1 else ''}"
    minutes = math.ceil(s / 60)
    if minutes < 60:
        return f"{minutes} minute{'s' if minutes != 1 else ''}"
    return "1 hour"


async def spend_hourly(store: GuardStore, bucket: str, limit: int, what: str, variable: str) -> None:
    """Count one action against `bucket`'s hourly `limit` (0 or less: no limit), or refuse it with 429 and
    Retry-After: "the limit of 5 uploads per hour (UPLOAD_RATE_PER_HOUR) is used up; try again in 37 minutes".
    For the actions counted apart from questions: uploads per key, ratings per client. `what` is singular."""
    if limit <= 0:
        return
    window = await store.rate_limit_hit(bucket, limit)
    if not window.admitted:
        retry = max(1, math.ceil(window.seconds_left))
        wait, plural = human_duration(retry), "s" if limit != 1 else ""
        raise ServiceError(
            429,
            "rate_limited",
            f"the limit of {limit} {what}{plural} per hour ({variable}) is used up; try again in {wait}",
            {"Retry-After": str(retry)},
        )


class RateLimiter:
    def __init__(self, store: GuardStore, per_hour: int, per_hour_api_key: int) -> None:
        self.store = store
        self.per_hour = per_hour
        self.per_hour_api_key = per_hour_api_key
        self._sweeper = Sweeper(
            "rate-limit windows", CLEANUP_EVERY_S, lambda: store.rate_limit_cleanup(CLEANUP_OLDER_THAN_S)
        )

    async def check(self, client_key: str, *, count: bool = True) -> tuple[RateLimitStage, Ticket | None]:
        """The stage, and a ticket when the request was counted (so a failure on our side can refund it).

        With `count=False` nothing is counted: a look, so that a client over its limit is turned away before
        it queues for a pipeline slot, while only a request that gets a slot takes a place in the limit.
        """
        timer = Timer()
        key, is_api_key = rate_limit_key(client_key)
        limit = self.per_hour_api_key if is_api_key else self.per_hour
        if limit <= 0:
            variable = "RATE_LIMIT_PER_HOUR_API_KEY" if is_api_key else "RATE_LIMIT_PER_HOUR"
            return RateLimitStage(detail=f"disabled: {variable} is 0"), None
        if count:
            window = await self.store.rate_limit_hit(key, limit)
            await self._sweeper.maybe_run()
        else:
            window = await self.store.rate_limit_peek(key, limit)
        who = "this API key" if is_api_key else "each address"
        if not window.admitted:
            retry_after = max(1, math.ceil(window.seconds_left))
            return RateLimitStage(
                status="blocked",
                ms=timer.ms,
                detail=f"the limit of {limit} question{'s' if limit != 1 else ''} per hour for {who} is used up; "
                f"try again in {human_duration(retry_after)}",
                limit=limit,
                remaining=0,
                retry_after_s=retry_after,
            ), None
        # A look leaves this request's own place still to take.
        remaining = max(0, limit - window.count - (0 if count else 1))
        stage = RateLimitStage(status="ok", ms=timer.ms, limit=limit, remaining=remaining)
        return stage, Ticket(key, window.window_start) if count else None

    async def refund(self, ticket: Ticket) -> None:
        """Best effort: when the database itself is what failed, the refund fails too, and is only logged."""
        try:
            await self.store.rate_limit_refund(ticket.key, ticket.window_start)
        except Exception as exc:
            log.warning("rate-limit refund failed", error=repr(exc))
