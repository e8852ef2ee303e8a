"""A site source's settings as a client gives them (`provenance sources add`, POST /corpora/{name}/sources),
checked once here: what is stored in the source's `options`, or BadSiteOption with the reason."""

from __future__ import annotations

import re
from typing import Any

from provenance.sources.urls import canonical

_EVERY = re.compile(r"^(\d+)([smhd])$")
_UNIT_S = {"s": 1, "m": 60, "h": 3600, "d": 86400}
# Less would be a crawl that never rests; the politeness delay alone makes a 2,000-page site take half an hour.
MIN_EVERY_S = 300


class BadSiteOption(ValueError):
    """A site's URL or option that can't be used, said in the option's own words."""


def every_s(text: str) -> int:
    found = _EVERY.match(text.strip())
    if not found:
        raise BadSiteOption(f"every {text!r}: a number and a unit, as 30m, 24h or 7d")
    seconds = int(found.group(1)) * _UNIT_S[found.group(2)]
    if seconds < MIN_EVERY_S:
        raise BadSiteOption(f"every {text!r}: at least {MIN_EVERY_S // 60} minutes between syncs")
    return seconds


def site_url(url: str) -> str:
    start = canonical(url)
    if start is None:
        raise BadSiteOption(f"{url!r} is not an http(s) URL")
    return start


def site_options(
    sitemap: str | None, prefix: str | None, max_pages: int | None, every: str | None, insecure: bool
) -> dict[str, Any]:
    options: dict[str, Any] = {}
    if sitemap is not None:
        options["sitemap"] = site_url(sitemap)
    if prefix is not None:
        if not prefix.startswith("/"):
            raise BadSiteOption(f"prefix {prefix!r}: a path, starting with /")
        options["prefix"] = prefix
    if max_pages is not None:
        if max_pages < 1:
            raise BadSiteOption("max pages: at least 1")
        options["maxPages"] = max_pages
    if every is not None:
        options["everyS"] = every_s(every)
    if insecure:
        options["insecure"] = True
    return options
