"""A web site as a source of documents (issue 46): crawled politely, re-synced conditionally.

The interface a sync job calls is `crawl.crawl(source, known, settings)`: a `Source` (the start URL, an
optional sitemap and path prefix, bounds), what the last sync kept of each page (`Known`, by canonical URL),
and `SourcesSettings`. It returns a `Crawl`, one `Page` a URL met, each with its outcome (`new`, `changed`,
`unchanged`, `removed`, `failed`, `skipped`) and reason, and for new and changed pages the blocks the
chunker reads. It stores nothing: what to embed, keep or drop is the job's (see docs/crawling.md).

Modules: `urls` (canonical URLs, origin and prefix), `guard` (no private addresses), `robots` (robots.txt,
read with protego), `fetch` (one page: politeness, redirects, limits, conditional requests), `sitemap`,
`extract` (a page's blocks, links, canonical link and heading ids) and `crawl` (the breadth-first walk).
"""
