"""A sitemap's page URLs: `<urlset>` read for its `<loc>`s, a `<sitemapindex>` followed one level down.
Namespaces are ignored, as sites get them wrong; anything that is not XML gives no URLs."""

from __future__ import annotations

from lxml import etree


def sitemap_locs(raw: bytes) -> tuple[list[str], list[str]]:
    """(page URLs, child sitemap URLs)."""
    try:
        root = etree.fromstring(raw, parser=etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=False))
    except etree.XMLSyntaxError:
        return [], []
    locs = [(el.text or "").strip() for el in root.iter("{*}loc", "loc")]
    locs = [loc for loc in locs if loc]
    if etree.QName(root).localname == "sitemapindex":
        return [], locs
    return locs, []
