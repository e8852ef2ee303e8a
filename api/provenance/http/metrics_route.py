"""GET /metrics, for Prometheus, and the hook that counts every response by route (provenance.metrics).

Not public. Who may read it is decided on the client's address as the service works it out (X-Forwarded-For
believed only from TRUSTED_PROXIES, as the rate limit does), never on the socket alone: behind a reverse proxy
every request arrives from the proxy's address.
- The bearer token METRICS_TOKEN, when set, opens it from anywhere.
- Without TRUSTED_PROXIES, a client on loopback may read it, unless the request says it was forwarded for
  someone else (a proxy on this machine that nobody declared in TRUSTED_PROXIES).
- With TRUSTED_PROXIES, only the token opens it: every request comes through a proxy, so none is local.
Anyone else gets the 404 an unknown path gets, word for word, so a scan can't tell the endpoint is there.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections.abc import Mapping
from typing import Any

from litestar import Request, Response, get
from litestar.datastructures import State
from litestar.di import NamedDependency
from litestar.exceptions import NotFoundException
from litestar.types import Message, Scope
from prometheus_client import CONTENT_TYPE_LATEST

from provenance import metrics as m
from provenance.guards.ratelimit import client_ip
from provenance.services import Services
from provenance.settings import Settings

# Headers a proxy adds: a request from loopback carrying one was forwarded for someone who may not be local.
FORWARDING_HEADERS = ("x-forwarded-for", "forwarded", "x-real-ip")


def may_read(settings: Settings, peer_ip: str | None, headers: Mapping[str, str]) -> bool:
    """`headers` with lower-case names."""
    token = settings.metrics.token
    if token is not None:
        scheme, _, given = headers.get("authorization", "").partition(" ")
        if scheme.lower() == "bearer" and hmac.compare_digest(given.strip().encode(), token.encode()):
            return True
    if settings.guards.trusted_proxies:
        return False
    if any(name in headers for name in FORWARDING_HEADERS):
        return False
    # Without trusted proxies this is the socket's peer, parsed as the rate limit parses it.
    address = client_ip(peer_ip, headers, ())
    try:
        return ipaddress.ip_address(address).is_loopback
    except ValueError:
        return False


@get("/metrics", include_in_schema=False)
async def metrics_endpoint(request: Request[Any, Any, State], services: NamedDependency[Services]) -> Response[bytes]:
    headers = {k.lower(): v for k, v in request.headers.items()}
    if not may_read(services.settings, request.client.host if request.client else None, headers):
        # The exception an unknown path raises, so the answer is the same 404, body and all.
        raise NotFoundException()
    body = await m.scrape(services.store, services.settings)
    return Response(body, media_type=CONTENT_TYPE_LATEST, headers={"Cache-Control": "no-store"})


async def count_response(message: Message, scope: Scope) -> None:
    """A `before_send` hook, so every response is counted, the router's own 404s and 405s included. By the
    route's template ("/passages/{passage_id}"), never the raw path, so that the number of series stays
    bounded whatever clients ask for."""
    if message["type"] == "http.response.start":
        m.count_response(scope.get("path_template") or "unmatched", message["status"])
