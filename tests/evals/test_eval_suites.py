"""The paraphrase suite is well formed and its references are handbook text; the hosted path's scripts cover
their suite and cite passages ingest makes; the negative-rejection generator removes exactly the sections
that hold each answer. Pure checks: no database, and no model but the embedder's tokenizer (no embedding)."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path

import pytest

from evals.hosted import load_scripts
from evals.negative_rejection import GroupResult, plan, read_corpus, render, split_sections, write_reduced_corpus
from provenance.evaluation.cases import Case, Expect, load_cases
from provenance.inference.embedder import Embedder
from provenance.ingest.chunking import chunk_blocks
from provenance.ingest.documents.read import read_document
from provenance.ingest.folder import read_sources
from provenance.settings import REPO_ROOT, Settings
from tests.factories import case_result

PARAPHRASE = REPO_ROOT / "evals" / "paraphrase.jsonl"
CORPUS = REPO_ROOT / "corpus"
NORMANS = REPO_ROOT.parent / "shared" / "benchmarks" / "squad2-normans"


def test_paraphrase_suite_is_well_formed() -> None:
    cases = load_cases(PARAPHRASE)
    assert len(cases) >= 40
    assert len({c.id for c in cases}) == len(cases)
    assert {c.bucket for c in cases} == {"paraphrase", "typo", "combined", "near-miss"}
    assert all(c.expect == "refuse" for c in cases if c.bucket == "near-miss")
    assert all(c.expect == "answer" and c.mustIncludeAny for c in cases if c.bucket != "near-miss")
    assert sum(c.expect == "refuse" for c in cases) >= 14
    ours = {c.question.strip().lower() for c in load_cases(REPO_ROOT / "evals" / "cases.jsonl")}
    assert not [c.id for c in cases if c.question.strip().lower() in ours]


def test_paraphrase_references_are_handbook_text() -> None:
    # What ingest reads, so COVERAGE.md (not ingested) can't vouch for a reference.
    files, _ = read_sources(CORPUS)
    handbook = "\n".join(f.text for f in files)
    missing = [(c.id, m) for c in load_cases(PARAPHRASE) for m in c.mustIncludeAny or [] if m not in handbook]
    assert not missing


def _case(id_: str, must: list[str], expect: Expect = "answer") -> Case:
    return Case(id=id_, bucket="answerable", question=f"q {id_}?", expect=expect, mustIncludeAny=must)


def test_generator_on_a_small_corpus(tmp_path: Path) -> None:
    text = "# Title\n\nIntro.\n\n## A\n\nApples are red.\n\n## B\n\nBananas are yellow.\n\n## C\n\nRed cherries.\n"
    files = [split_sections("f.md", text)]
    assert files[0].preamble + "".join(s.text for s in files[0].sections) == text
    cases = [
        _case("1", ["red"]),  # A and C, case-insensitively
        _case("2", ["Bananas"]),
        _case("3", ["RED"]),  # same sections as 1: one group
        _case("4", ["durian"]),  # in no section
        _case("5", ["are", "cherries"]),  # in every section
        _case("6", ["red"], expect="refuse"),  # not answerable: not part of the suite
    ]
    p = plan(files, cases)
    groups = {g.removed: [c.id for c in g.cases] for g in p.groups}
    assert groups == {("f.md#A", "f.md#C"): ["1", "3"], ("f.md#B",): ["2"]}
    assert {s.case.id for s in p.skipped} == {"4", "5"}
    assert all(c.expect == "refuse" and c.bucket == "negative-rejection" for g in p.groups for c in g.cases)
    write_reduced_corpus(files, ("f.md#A", "f.md#C"), tmp_path)
    assert (tmp_path / "f.md").read_text() == "# Title\n\nIntro.\n\n## B\n\nBananas are yellow.\n\n"


def test_report_lists_fabricated_cases() -> None:
    files = [split_sections("f.md", "## A\n\nApples.\n\n## B\n\nBananas.\n")]
    p = plan(files, [_case("1", ["Apples"])])
    fabricated = case_result(
        id="1",
        bucket="negative-rejection",
        question="q 1?",
        expect="refuse",
        answer="Bananas.",
        citations=["f.md#b"],
        groundedness=0.81,
        min_claim=0.81,
        relevance=0.9,
        relevance_rule="every",
        claim_support=[0.81],
        claim_relevance=[0.9],
        ms=5.0,
        must_include_any=["Apples"],
    )
    report = render(NORMANS, p, [GroupResult(p.groups[0], [fabricated])], Settings(), "local", None, 1.0)
    assert "**Fabrication rate: 100.0%**" in report
    assert "| 1 | q 1? | A | Apples | Bananas. | 0.81 | 0.81 | 0.81 / 0.90 |" in report


@pytest.mark.skipif(not NORMANS.exists(), reason=f"external suite not found at {NORMANS}")
def test_generator_on_the_normans_suite(tmp_path: Path) -> None:
    files = read_corpus(NORMANS / "corpus")
    assert [f.name for f in files] == ["normans.md"] and len(files[0].sections) == 39
    cases = load_cases(NORMANS / "cases.jsonl")
    p = plan(files, cases)
    removed = {c.id: g.removed for g in p.groups for c in g.cases}
    part = "normans.md#Normans, part {}".format
    # "Denmark, Iceland and Norway": the first paragraph only.
    assert removed["56ddde6b9a695914005b962a"] == (part(1),)
    # "France" is in eight paragraphs, and all of them go.
    assert removed["56ddde6b9a695914005b9628"] == tuple(part(n) for n in (1, 2, 4, 5, 6, 7, 17, 37))
    # Two questions answered by "Robert Guiscard" share one reduced corpus.
    assert removed["56de148dcffd8e1900b4b5bc"] == (part(12), part(39))
    guiscard = next(g for g in p.groups if g.removed == (part(12), part(39)))
    assert {"56de148dcffd8e1900b4b5bc", "56de52614396321400ee27fd"} <= {c.id for c in guiscard.cases}
    # "Norman" is in every paragraph: nothing would be left to ask.
    assert [s.case.id for s in p.skipped] == ["56de3cd0cffd8e1900b4b6bf"]
    assert p.n_cases + len(p.skipped) == sum(c.expect == "answer" for c in cases)
    assert len({g.removed for g in p.groups}) == len(p.groups)
    # In every reduced corpus no reference of its cases is left, and every other paragraph is.
    for i, g in enumerate(p.groups):
        out = tmp_path / str(i)
        write_reduced_corpus(files, g.removed, out)
        reduced = (out / "normans.md").read_text(encoding="utf-8")
        assert reduced.startswith("# Normans\n")
        assert reduced.count("\n## ") == 39 - len(g.removed)
        low = reduced.lower()
        assert not [m for c in g.cases for m in c.mustIncludeAny or [] if m.lower() in low]


HANDBOOK_18F = REPO_ROOT.parent / "shared" / "corpora" / "18f-handbook" / "pages"


def test_18f_suite_is_well_formed() -> None:
    cases = load_cases(REPO_ROOT / "evals" / "18f-handbook.jsonl")
    assert len({c.id for c in cases}) == len(cases)
    assert {c.bucket for c in cases} == {"answerable", "near-miss"}
    assert sum(c.expect == "answer" and bool(c.mustIncludeAny) for c in cases) >= 30
    assert sum(c.expect == "refuse" for c in cases if c.bucket == "near-miss") >= 10


@pytest.mark.skipif(not HANDBOOK_18F.is_dir(), reason="the 18F handbook is not beside this checkout")
def test_18f_references_are_handbook_text() -> None:
    # The handbook as written, line breaks aside: a reference is a reader's words, never Markdown syntax.
    handbook = " ".join(" ".join(p.read_text(encoding="utf-8").split()) for p in HANDBOOK_18F.rglob("*.md"))
    cases = load_cases(REPO_ROOT / "evals" / "18f-handbook.jsonl")
    assert not [(c.id, m) for c in cases for m in c.mustIncludeAny or [] if m not in handbook]


# The hosted path's scripts (evals/hosted.py), and the suites whose answerable cases they script.
HOSTED_SCRIPTS = REPO_ROOT / "evals" / "hosted-scripts.jsonl"
HOSTED_SCRIPTS_18F = REPO_ROOT / "evals" / "hosted-scripts-18f.jsonl"
SUITES = {"cases": REPO_ROOT / "evals" / "cases.jsonl", "paraphrase": PARAPHRASE}
SUITES_18F = {"18f": REPO_ROOT / "evals" / "18f-handbook.jsonl"}


@pytest.mark.parametrize(
    ("scripts", "suites"),
    [pytest.param(HOSTED_SCRIPTS, SUITES, id="corpus"), pytest.param(HOSTED_SCRIPTS_18F, SUITES_18F, id="18f")],
)
def test_hosted_scripts_cover_every_answerable_case(scripts: Path, suites: dict[str, Path]) -> None:
    rows = load_scripts(scripts)
    answerable = {c.id: suite for suite, path in suites.items() for c in load_cases(path) if c.expect == "answer"}
    assert sorted(r.id for r in rows) == sorted(answerable)  # each case once, and no case it doesn't have
    assert not [r.id for r in rows if r.suite != answerable[r.id]]
    for r in rows:
        for kind, s in (("faithful", r.faithful), ("fabricated", r.fabricated), ("offQuestion", r.offQuestion)):
            assert s.answer.strip() and 1 <= len(s.claims) <= 3 and all(c.strip() for c in s.claims), (r.id, kind)
            assert s.passages, (r.id, kind)
        assert r.fabricated.kind and r.fabricated.changed, r.id


def chunker_ids(folder: Path, names: Iterable[str], count_tokens: Callable[[str], int]) -> set[str]:
    """The passage ids ingest makes of these files: read and chunked as ingest does them, nothing embedded."""
    max_tokens = Settings().ingest.chunk_max_tokens
    return {
        chunk.id
        for name in names
        for chunk in chunk_blocks(name, read_document(name, (folder / name).read_bytes()), count_tokens, max_tokens)
    }


@pytest.mark.parametrize(
    ("scripts", "corpus"),
    [
        pytest.param(HOSTED_SCRIPTS, CORPUS, id="corpus"),
        pytest.param(
            HOSTED_SCRIPTS_18F,
            HANDBOOK_18F,
            id="18f",
            marks=pytest.mark.skipif(not HANDBOOK_18F.is_dir(), reason="the 18F handbook is not beside this checkout"),
        ),
    ],
)
def test_hosted_scripts_cite_passages_ingest_makes(scripts: Path, corpus: Path, embedder: Embedder) -> None:
    # An id the reader doesn't make is never in a prompt, so the scripted model would cite something else.
    rows = load_scripts(scripts)
    cited = {(r.id, pid) for r in rows for s in (r.faithful, r.fabricated, r.offQuestion) for pid in s.passages}
    made = chunker_ids(corpus, {pid.split("#", 1)[0] for _, pid in cited}, embedder.count_tokens)
    assert not sorted((case, pid) for case, pid in cited if pid not in made)
