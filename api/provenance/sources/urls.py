"""URLs as the crawler compares them: one canonical spelling a page, so it is fetched and stored once.

courlan normalises (lower-case scheme and host, default port dropped, query parameters sorted, tracking
parameters such as `utm_*` and `fbclid` dropped); the fragment goes too, since it names a place in the
page, not another page. A page's own `rel=canonical` is applied later, by the crawl, once it is read.
"""

from __future__ import annotations

from urllib.parse import urljoin, urlsplit, urlunsplit

from courlan import normalize_url


def canonical(url: str, base: str | None = None) -> str | None:
    """The canonical form of `url` (resolved against `base`), or None for what is not an http(s) page
    address (mailto:, javascript:, a malformed URL)."""
    try:
        absolute = urljoin(base, url.strip()) if base else url.strip()
        parts = urlsplit(absolute)
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    try:
        normal = normalize_url(urlunsplit(parts._replace(fragment="")), strict=False)
    except (ValueError, AttributeError):
        return None
    return urlunsplit(urlsplit(normal)._replace(fragment=""))


def origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}".lower()


def default_prefix(url: str) -> str:
    """The start URL's folder: `/docs/` for `/docs/` and for `/docs/intro.html`."""
    path = urlsplit(url).path or "/"
    return path[: path.rfind("/") + 1]


def within(url: str, site_origin: str, prefix: str) -> bool:
    return origin(url) == site_origin and (urlsplit(url).path or "/").startswith(prefix)


def path_and_query(url: str) -> tuple[str, str]:
    parts = urlsplit(url)
    return parts.path or "/", parts.query
