"""No fetch of an address on a private, loopback, link-local or otherwise non-public network, unless
SOURCES_ALLOW_PRIVATE allows it: a shared deployment must not become a way into its own network.

The check is on the addresses the name resolves to, not on the name: `localhost.example.com` pointing at
127.0.0.1 is refused like `127.0.0.1` itself. Every redirect hop is checked again. A known gap: httpx
resolves the name once more when it connects, so a name whose answer changes between the two lookups (DNS
rebinding with a zero TTL) could slip through; closing it means connecting to the checked address itself.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from urllib.parse import urlsplit


class PrivateAddress(Exception):
    """The URL's host is, or resolves to, a non-public address."""


def _public(address: str) -> bool:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    return ip.is_global and not ip.is_multicast


async def check_public(url: str) -> None:
    parts = urlsplit(url)
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    try:
        infos = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror:
        return  # nothing to connect to: the fetch fails on its own, as a network error
    for *_, sockaddr in infos:
        address = str(sockaddr[0])
        if not _public(address):
            raise PrivateAddress(f"{host} resolves to {address}, a non-public address")
