"""Markdown read as a reader of the rendered page reads it (provenance.ingest.documents.markdown): one fixture with
every construct the issue names, its passages' text and breadcrumbs asserted exactly, and their sentence
units as ingest stores them."""

from __future__ import annotations

from provenance import text as T
from provenance.ingest.chunking import chunk_document
from provenance.ingest.documents.markdown import drop_template_tags, read_markdown

FIXTURE = """---
title: "Benefits & Perks"
layout: page
---
{% include alert.html %}

Welcome to the *Basecamp* handbook. We pay for [11 local holidays](https://3.basecamp.com/x/{{ page.id }})
and **three** weeks of vacation, and every
wrapped line joins its paragraph.<!-- a note for editors -->

## Health Insurance

### Medical Insurance

The company pays 75% of the premium and the employee pays the other 25%.

* Employee-only medical coverage: $95.10
* Employee-family medical coverage: $287.65*
  * Dependants up to age 26
  * Spouses and domestic partners
* Prescriptions

\\*Prices are per month.

### Dental Insurance

The company pays 100% of the premium. <span class="note">Cleanings are <b>free</b>.</span>

## Salaries

| Level | Salary | Note |
|---|---|---|
| Junior (L1) | $73,500 | the [floor](https://m.signalvnoise.com/floor) |
| Senior (L3) | **$128,000** | `a\\|b` in code |

## Tools

We write C# and Python, and 5 * 3 is 15. Use `git push` to publish and `a|b` to pipe. ![The team at work](team.png)

<div class="callout">Ask in <a href="https://slack.example">#help</a> first.</div>

```python
def pay(level):

    return {{ salary }} * 2
```
"""

PASSAGES = [
    (
        "policy.md#intro",
        "Benefits & Perks",
        "Welcome to the Basecamp handbook. We pay for 11 local holidays and three weeks of vacation, and every "
        "wrapped line joins its paragraph.",
    ),
    (
        "policy.md#health-insurance--medical-insurance",
        "Benefits & Perks > Health Insurance > Medical Insurance",
        "The company pays 75% of the premium and the employee pays the other 25%.\n\n"
        "• Employee-only medical coverage: $95.10\n"
        "• Employee-family medical coverage: $287.65*\n"
        "  • Dependants up to age 26\n"
        "  • Spouses and domestic partners\n"
        "• Prescriptions\n\n"
        "*Prices are per month.",
    ),
    (
        "policy.md#health-insurance--dental-insurance",
        "Benefits & Perks > Health Insurance > Dental Insurance",
        "The company pays 100% of the premium. Cleanings are free.",
    ),
    (
        "policy.md#salaries",
        "Benefits & Perks > Salaries",
        "Level: Junior (L1), Salary: $73,500, Note: the floor.\n"
        "Level: Senior (L3), Salary: $128,000, Note: a|b in code.",
    ),
    (
        "policy.md#tools",
        "Benefits & Perks > Tools",
        "We write C# and Python, and 5 * 3 is 15. Use git push to publish and a|b to pipe. The team at work\n\n"
        "Ask in #help first.\n\n"
        "    def pay(level):\n"
        "        return {{ salary }} * 2",
    ),
]


def words(text: str) -> int:
    return len(text.split())


def test_the_fixture_reads_as_the_rendered_page() -> None:
    # In a table a pipe inside a code span is written `\\|` (GitHub's table extension); it reads as "|".
    chunks = chunk_document("policy.md", FIXTURE, words)
    assert [(c.id, c.heading, c.text) for c in chunks] == PASSAGES


def test_sentence_units_end_at_list_items_and_rows_and_keep_code_whole() -> None:
    chunks = {c.id: c for c in chunk_document("policy.md", FIXTURE, words)}
    medical = chunks["policy.md#health-insurance--medical-insurance"]
    assert T.split_sentences(medical.text) == [
        "The company pays 75% of the premium and the employee pays the other 25%.",
        "Employee-only medical coverage: $95.10",
        "Employee-family medical coverage: $287.65*",
        "Dependants up to age 26",
        "Spouses and domestic partners",
        "Prescriptions",
        "*Prices are per month.",
    ]
    assert T.split_sentences(chunks["policy.md#salaries"].text) == [
        "Level: Junior (L1), Salary: $73,500, Note: the floor.",
        "Level: Senior (L3), Salary: $128,000, Note: a|b in code.",
    ]
    tools = chunks["policy.md#tools"].text
    spans = T.sentence_spans(tools)
    assert tools[spans[-1][0] : spans[-1][1]] == "def pay(level):\n        return {{ salary }} * 2"
    assert [tools[a:b] for a, b in spans[:-1]] == [
        "We write C# and Python, and 5 * 3 is 15.",
        "Use git push to publish and a|b to pipe.",
        "The team at work",
        "Ask in #help first.",
    ]


def test_no_markdown_syntax_survives_but_literal_characters_do() -> None:
    text = "\n".join(c.text for c in chunk_document("policy.md", FIXTURE, words))
    for syntax in ("](", "**", "{%", "{{ page", "<span", "<!--", "| Junior", "|---", "![", "```", "\\*"):
        assert syntax not in text
    for literal in ("C#", "a|b", "5 * 3", "$287.65*", "*Prices"):
        assert literal in text


def test_front_matter_without_a_title_is_dropped_and_headings_stay_headings() -> None:
    blocks = read_markdown("---\nlayout: page\n---\n# Handbook\n\nText.\n")
    assert [(b.level, b.text) for b in blocks] == [(1, "Handbook"), (0, ""), (0, "Text.")]


def test_template_tags_inside_fenced_code_are_the_example() -> None:
    source = "{% raw %}\n```\n{{ kept }}\n```\n{{ dropped }}\n"
    assert drop_template_tags(source) == "```\n{{ kept }}\n```\n"


def test_a_tag_within_a_line_leaves_the_markup_around_it_parsed() -> None:
    blocks = read_markdown('To send, **reach out in {% slack_channel "x" %}**. See [the page]({% page "/p" %}).\n')
    assert [b.text for b in blocks] == ["To send, reach out in. See the page."]
