"""The crawler's two HTML extractors measured on the test site (docs/crawling.md has the table):
`python -m tests.sources.measure_extraction [N]`.

On a fixed sample of N pages (100; seed 46), each page is read by both extractors and cut into passages by
the chunker ingest uses (`chunk_blocks`, 256 tokens of the embedder's tokenizer). Then:
- a passage is *made of chrome* when, once every text of the template's menu, cookie banner, breadcrumbs,
  related-pages box and newsletter footer is taken out of it, less than half its letters remain; it *holds
  chrome* when any of those texts of three words or more is in it (a menu's "Tools" is also content's);
- *of 100 sampled passages*: the same count in 100 passages drawn from all of them (seed 46), the form
  of issue 46's target;
- a heading *survives* when a heading of the page's content (`h2`-`h4` in the content div) is a heading
  in the extractor's blocks, so the passage's heading path names it;
- *content kept* is the share of the content div's words (as a multiset) found in the passages.
"""

from __future__ import annotations

import random
import re
import sys
from collections import Counter
from typing import Any

import lxml.html

from provenance.ingest.chunking import chunk_blocks
from provenance.ingest.documents.blocks import collapse
from provenance.services import load_embedder
from provenance.settings import Settings
from provenance.sources.extract import Extractor, extract
from tests.sources.site_build import build

CHROME_IDS = ("menu", "cookies", "related", "newsletter")
CHROME_CLASSES = ("brand", "breadcrumbs")
_WORD = re.compile(r"[a-z0-9]+")


def _chrome_texts(root: Any) -> list[str]:
    texts: set[str] = set()
    chrome = [root.get_element_by_id(i) for i in CHROME_IDS]
    chrome += [el for c in CHROME_CLASSES for el in root.find_class(c)]
    for el in chrome:
        for node in el.iter():
            for piece in (node.text, node.tail if node is not el else None):
                text = collapse(piece or "")
                if len(text) > 1:
                    texts.add(text)
    texts.add("Print this page")
    return sorted(texts, key=len, reverse=True)


def _letters(text: str) -> int:
    return sum(c.isalpha() for c in text)


def measure(n: int = 100) -> dict[str, dict[str, float]]:
    site = build()
    paths = random.Random(46).sample(sorted(site), n)
    embedder = load_embedder(Settings(), for_ingest=True)
    results: dict[str, dict[str, float]] = {}
    for extractor in ("reader", "trafilatura"):
        made = holds = passages = headings = kept_headings = 0
        verdicts: list[bool] = []
        content_words = kept_words = 0
        for path in paths:
            raw = site[path].encode()
            root = lxml.html.document_fromstring(raw)
            chrome = _chrome_texts(root)
            content = root.get_element_by_id("content")
            wanted = [collapse(h.text_content()) for h in content.iter("h2", "h3", "h4")]
            ex = extract(raw, "html", extractor_name(extractor))
            got = {b.text for b in ex.blocks if b.level}
            headings += len(wanted)
            kept_headings += sum(1 for h in wanted if h in got)
            chunks = chunk_blocks(path, ex.blocks, embedder.count_tokens, 256)
            words_in = Counter(_WORD.findall(content.text_content().lower()))
            words_out = Counter(_WORD.findall(" ".join(c.text for c in chunks).lower()))
            content_words += sum(words_in.values())
            kept_words += sum((words_in & words_out).values())
            for chunk in chunks:
                text = collapse(chunk.text)
                passages += 1
                rest = text
                for piece in chrome:
                    rest = rest.replace(piece, " ")
                if any(piece in text for piece in chrome if len(piece.split()) >= 3):
                    holds += 1
                verdicts.append(_letters(rest) < 0.5 * _letters(text))
                made += verdicts[-1]
        results[extractor] = {
            "passages": passages,
            "made of chrome": made,
            "of 100 sampled": sum(random.Random(46).sample(verdicts, 100)),
            "holding chrome": holds,
            "headings kept": kept_headings / max(headings, 1),
            "content kept": kept_words / max(content_words, 1),
        }
    return results


def extractor_name(name: str) -> Extractor:
    return "trafilatura" if name == "trafilatura" else "reader"


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100
    results = measure(n)
    print(
        f"| extractor ({n} pages) | passages | made of chrome | of 100 sampled passages | holding chrome "
        "| headings kept | content kept |"
    )
    print("|---|---|---|---|---|---|---|")
    for name, r in results.items():
        print(
            f"| {name} | {r['passages']:.0f} | {r['made of chrome']:.0f} | {r['of 100 sampled']:.0f} "
            f"| {r['holding chrome']:.0f} "
            f"| {r['headings kept']:.3f} | {r['content kept']:.3f} |"
        )


if __name__ == "__main__":
    main()
