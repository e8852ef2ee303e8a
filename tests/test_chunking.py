from provenance.chunking import chunk_document, slugify


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


def test_h2_headings_are_hard_boundaries_with_stable_ids() -> None:
    chunks = chunk_document("a.md", DOC, count, max_tokens=100)
    assert [c.id for c in chunks] == ["a.md#opening-hours", "a.md#fees-prices"]
    assert chunks[0].heading == "Handbook > Opening Hours"
    assert "9 pm" in chunks[0].text and "$14" not in chunks[0].text
    assert "Students pay less." in chunks[1].text  # ### stays inside its section
    assert chunks[0].token_count == count(chunks[0].text)


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
