"""robots.txt, read with protego (Scrapy's parser: wildcards, Allow/Disallow precedence, Crawl-delay,
Sitemap lines), and answered for the group of our own product token.

When there is none (4xx), everything is allowed; when it can't be read (5xx, a network failure), nothing is,
as RFC 9309 says: a site whose robots.txt is down has not said it welcomes robots.
"""

from __future__ import annotations

from dataclasses import dataclass

from protego import Protego

from provenance import __version__

PRODUCT = "Provenance"
USER_AGENT = f"{PRODUCT}/{__version__} (site crawler of the Provenance question-answering service; obeys robots.txt)"


@dataclass(frozen=True)
class Robots:
    rules: Protego | None
    allow_all: bool  # only read when rules is None

    @classmethod
    def parse(cls, text: str) -> Robots:
        return cls(Protego.parse(text), allow_all=True)

    @classmethod
    def missing(cls) -> Robots:
        return cls(None, allow_all=True)

    @classmethod
    def unreadable(cls) -> Robots:
        return cls(None, allow_all=False)

    def allowed(self, url: str) -> bool:
        if self.rules is None:
            return self.allow_all
        return bool(self.rules.can_fetch(url, PRODUCT))

    def crawl_delay(self) -> float:
        if self.rules is None:
            return 0.0
        delay = self.rules.crawl_delay(PRODUCT)
        return float(delay) if delay else 0.0

    def sitemaps(self) -> list[str]:
        return list(self.rules.sitemaps) if self.rules is not None else []
