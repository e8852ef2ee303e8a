"""The crawler's test site: the 18F handbook's Markdown rendered to HTML, every page in one fixed template
(`site_template.html`) that marks none of its chrome the way the HTML reader looks for it. There is no
`<main>`, `<nav>`, `<header>` or `<footer>`: the menu, the cookie banner, the "related pages" box and the
newsletter footer are plain `div`s, as on many real sites.

The site is built at test time from this script, the template and the pinned corpus in
`shared/corpora/18f-handbook/pages` (246 files), not committed: it is 3 MB of derived HTML that would
change whenever the renderer does, while what defines it (script, template, input) is committed and the
build is deterministic (`site_digest` is recorded in docs/crawling.md). Run it by hand with
`python -m tests.sources.site_build OUT_DIR` to look at the pages.

URLs: `pages/a/b.md` is `/handbook/a/b/`, `pages/a/index.md` is `/handbook/a/`. Menu links carry a
`#content` fragment and related links `utm_` parameters, and every page links to its `?print=1` copy,
which names the page as `rel=canonical`: what URL canonicalisation has to fold back to one page.
"""

from __future__ import annotations

import hashlib
import html
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from string import Template

from markdown_it import MarkdownIt
from mdit_py_plugins.anchors import anchors_plugin
from mdit_py_plugins.front_matter import front_matter_plugin

from provenance.ingest.documents.markdown import drop_template_tags

HANDBOOK = Path(__file__).resolve().parents[3] / "shared" / "corpora" / "18f-handbook" / "pages"
TEMPLATE = Template((Path(__file__).with_name("site_template.html")).read_text())
PREFIX = "/handbook/"
RELATED = 3

_RENDER = (
    MarkdownIt("commonmark")
    .enable(["table", "strikethrough"])
    .use(front_matter_plugin)
    .use(anchors_plugin, min_level=2, max_level=4)
)
_TITLE = re.compile(r"""^title:\s*(["']?)(.*?)\1\s*$""", re.MULTILINE)
_FIRST_HEADING = re.compile(r"^#\s+(.+)$", re.MULTILINE)
_LEADING_H1 = re.compile(r"^\s*#\s+.+\n", re.MULTILINE)
_PLACEHOLDER = "\ue000"
# The handbook's links to its own pages: `[text]({% page "/path/" %})` and `[ref]: {% page "/path/" %}`. The real
# site writes the page's URL there; dropped as other tags are, a reference definition is left with no
# destination, which CommonMark does not take for one, and its `[text][ref]` was shown with its brackets. Each
# points at "#" here: the link reads as on the real site, and the walk meets no URL this site doesn't serve (the
# handbook links to its redirect_from aliases too).
_PAGE_LINK = re.compile(r"""\{%-?\s*page\s+["'][^"']*["']\s*-?%\}""")


@dataclass(frozen=True)
class SourcePage:
    file: Path  # relative to the handbook
    path: str  # the URL path
    title: str
    section: str
    markdown: str


def url_path(rel: Path) -> str:
    parts = list(rel.with_suffix("").parts)
    if parts[-1] == "index":
        parts = parts[:-1]
    return PREFIX + "".join(p + "/" for p in parts)


def _title(text: str, rel: Path) -> str:
    front = text.split("---", 2)[1] if text.startswith("---") else ""
    found = _TITLE.search(front) or _FIRST_HEADING.search(text)
    return found.group(found.lastindex or 1).strip() if found else rel.stem.replace("-", " ").capitalize()


def source_pages(root: Path = HANDBOOK) -> list[SourcePage]:
    pages = []
    for file in sorted(root.rglob("*.md")):
        rel = file.relative_to(root)
        text = file.read_text(encoding="utf-8")
        section = rel.parts[0] if len(rel.parts) > 1 else "general"
        pages.append(SourcePage(rel, url_path(rel), _title(text, rel), section, text))
    return pages


def _section_name(section: str) -> str:
    return section.replace("-", " ").capitalize()


def render_page(page: SourcePage, pages: list[SourcePage], origin: str = "") -> str:
    """One page in the template. `origin` makes the canonical link absolute, as sites write it."""
    body_md = drop_template_tags(_PAGE_LINK.sub("#", page.markdown)).replace(_PLACEHOLDER, "")
    if page.markdown.lstrip().startswith("#") or not page.markdown.startswith("---"):
        body_md = _LEADING_H1.sub("", body_md, count=1)  # the template writes the title as the h1
    body = _RENDER.render(body_md)
    sections: dict[str, SourcePage] = {}
    for p in pages:
        sections.setdefault(p.section, p)
    menu = "\n".join(
        f'      <li><a href="{s.path}#content">{html.escape(_section_name(name))}</a></li>'
        for name, s in sections.items()
    )
    siblings = [p for p in pages if p.section == page.section]
    at = siblings.index(page)
    related = [siblings[(at + k) % len(siblings)] for k in range(1, RELATED + 1) if len(siblings) > k]
    related_html = "\n".join(
        f'      <li><a href="{r.path}?utm_source=related&amp;utm_medium=web">{html.escape(r.title)}</a>'
        f" - more from {html.escape(_section_name(r.section))}, popular with readers this week</li>"
        for r in related
    )
    return TEMPLATE.substitute(
        title=html.escape(page.title),
        canonical=origin + page.path,
        menu=menu,
        section=html.escape(_section_name(page.section)),
        section_href=sections[page.section].path,
        body=body + f'<p><a href="{page.path}?print=1">Print this page</a></p>',
        related=related_html,
    )


def sitemap(paths: list[str], origin: str) -> str:
    urls = "\n".join(f"  <url><loc>{html.escape(origin + p)}</loc></url>" for p in paths)
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        '<urlset xmlns="http://www.sitemaps.org/schemas/sitemap/0.9">\n'
        f"{urls}\n</urlset>\n"
    )


def build(origin: str = "") -> dict[str, str]:
    """Every page's HTML by URL path."""
    pages = source_pages()
    return {p.path: render_page(p, pages, origin) for p in pages}


def site_digest() -> str:
    built = build()
    return hashlib.sha256("".join(k + built[k] for k in sorted(built)).encode()).hexdigest()[:16]


def main(out: Path) -> None:
    for path, page in build().items():
        target = out / path.strip("/") / "index.html"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(page, encoding="utf-8")
    print(f"{len(list(out.rglob('index.html')))} pages in {out}; digest {site_digest()}")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
