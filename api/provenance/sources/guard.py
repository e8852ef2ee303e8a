"""No fetch of an address on a private, loopback, link-local or otherwise non-public network, unless
SOURCES_ALLOW_PRIVATE allows it: a shared deployment must not become a way into its own network.

The check is on the addresses the name resolves to, not on the name: `localhost.example.com` pointing at
127.0.0.1 is refused like `127.0.0.1` itself. And the address checked is the address connected to:
`GuardedBackend` is the network backend of the crawler's HTTP client, so every connection (each redirect
hop's too) resolves its host once, refuses when any answer is not public, and connects to the checked IP
itself. A name whose answer changes between a check and a connect (DNS rebinding with a zero TTL) has no
second lookup to change in. TLS still verifies the certificate against the name: httpcore takes the SNI
name from the request's URL, not from the address the stream was opened to.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable
from typing import Any
from urllib.parse import urlsplit

import httpcore

# (host, port) -> getaddrinfo's answers; a parameter so that a test can play a rebinding resolver.
Resolve = Callable[[str, int], Awaitable[list[tuple[Any, ...]]]]


class PrivateAddress(Exception):
    """The URL's host is, or resolves to, a non-public address."""


def _public(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


async def system_resolve(host: str, port: int) -> list[tuple[Any, ...]]:
    return await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)


async def public_addresses(host: str, port: int, resolve: Resolve = system_resolve) -> list[str]:
    """The addresses `host` resolves to, all public, or PrivateAddress. [] when the name doesn't resolve:
    nothing to connect to, so the fetch fails on its own, as a network error."""
    try:
        infos = await resolve(host, port)
    except socket.gaierror:
        return []
    addresses = list(dict.fromkeys(str(sockaddr[0]) for *_, sockaddr in infos))
    for address in addresses:
        if not _public(address):
            raise PrivateAddress(f"{host} resolves to {address}, a non-public address")
    return addresses


async def check_public(url: str, resolve: Resolve = system_resolve) -> None:
    parts = urlsplit(url)
    await public_addresses(parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80), resolve)


class GuardedBackend(httpcore.AsyncNetworkBackend):
    """Connects only to public addresses, to the very address it checked."""

    def __init__(self, *, allow_private: bool, resolve: Resolve = system_resolve) -> None:
        self.inner = httpcore.AnyIOBackend()
        self.allow_private = allow_private
        self.resolve = resolve

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        if self.allow_private:
            return await self.inner.connect_tcp(host, port, timeout, local_address, socket_options)
        addresses = await public_addresses(host, port, self.resolve)
        if not addresses:
            raise httpcore.ConnectError(f"{host} does not resolve")
        failure: Exception | None = None
        for address in addresses:  # as a resolver's answers are tried in turn, each one checked above
            try:
                return await self.inner.connect_tcp(address, port, timeout, local_address, socket_options)
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                failure = exc
        assert failure is not None
        raise failure

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise PrivateAddress("a Unix socket is not a site")

    async def sleep(self, seconds: float) -> None:
        await self.inner.sleep(seconds)
