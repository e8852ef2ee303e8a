from provenance.ingest.chunking import chunk_document, slugify


def count(text: str) -> int:
    return len(text.split())


DOC = """# Handbook

## Opening Hours

We open at 9 am.

We close at 9 pm.

## Fees & Prices

A locker costs $14.

### Discounts

Students pay less.
"""


def test_every_heading_bounds_a_passage_that_keeps_its_whole_path() -> None:
    chunks = chunk_document("a.md", DOC, count, max_tokens=100)
    # `##` ids are what they were when `###` stayed inside; a `###` passage is named under its `##`.
    assert [c.id for c in chunks] == ["a.md#opening-hours", "a.md#fees-prices", "a.md#fees-prices--discounts"]
    assert [c.heading for c in chunks] == [
        "Handbook > Opening Hours",
        "Handbook > Fees & Prices",
        "Handbook > Fees & Prices > Discounts",
    ]
    assert "9 pm" in chunks[0].text and "$14" not in chunks[0].text
    # A subheading is the breadcrumb, never a sentence of the text.
    assert chunks[1].text == "A locker costs $14."
    assert chunks[2].text == "Students pay less."
    assert chunks[0].token_count == count(chunks[0].text)


def test_deeper_paths_close_at_their_level() -> None:
    doc = "# T\n\n## A\n\n### B\n\n#### C\n\nc.\n\n### D\n\nd.\n\n## A\n\n### B\n\nb.\n"
    chunks = chunk_document("p.md", doc, count)
    assert [(c.id, c.heading) for c in chunks] == [
        ("p.md#a--b--c", "T > A > B > C"),
        ("p.md#a--d", "T > A > D"),
        ("p.md#a-2--b", "T > A > B"),
    ]
    # A deeper heading straight under the title is named under the title's intro.
    chunks = chunk_document("q.md", "# T\n\nIntro.\n\n### B\n\nb.\n\n## C\n\nc.\n", count)
    assert [(c.id, c.heading) for c in chunks] == [("q.md#intro", "T"), ("q.md#intro--b", "T > B"), ("q.md#c", "T > C")]


def test_long_sections_split_at_paragraphs_under_the_cap() -> None:
    body = "\n\n".join(f"Paragraph {i} " + "word " * 30 for i in range(6))
    chunks = chunk_document("b.md", f"## Long\n\n{body}\n", count, max_tokens=70)
    assert len(chunks) == 3
    assert [c.id for c in chunks] == ["b.md#long-p1", "b.md#long-p2", "b.md#long-p3"]
    assert all(c.token_count <= 70 for c in chunks)
    assert all(c.text.startswith("Paragraph") for c in chunks)


def test_ids_are_stable_and_unique() -> None:
    doc = "## Same\n\nOne.\n\n## Same\n\nTwo.\n"
    ids = [c.id for c in chunk_document("c.md", doc, count)]
    assert ids == ["c.md#same", "c.md#same-2"]
    assert ids == [c.id for c in chunk_document("c.md", doc, count)]
    assert slugify("Bike Storage!") == "bike-storage"


def test_text_before_the_first_section_is_an_intro_passage() -> None:
    chunks = chunk_document("d.txt", "Plain text with no headings at all.", count)
    assert [c.id for c in chunks] == ["d.txt#intro"]
