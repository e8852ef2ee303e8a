"""The format check: `corpus/` rendered to HTML, PDF and Word must answer as well as its Markdown does.

    .venv/bin/python -m evals.formats [--corpus DIR] [--cases FILE] [--out FILE]

Each document of the corpus (what ingest reads from it: README.md and COVERAGE.md carry the ignore marker
and examples.json holds questions, so those are copied as they are and stay out of the passages, as in the
Markdown corpus) is rendered by tests/ingest/documents_support.py, the same generators the reader tests use:

- HTML: a whole web page with what a saved page carries around the content (navigation, a script, a
  header, a footer, an aside), which the reader must drop;
- PDF: that page without the extras, printed by Chromium in a narrow, hyphenated column on A5 with a
  running header and a "Page N of M" footer and no outline, so headings come from font sizes and the
  reader must remove the running lines and join hyphenated words; and once more with an outline
  (bookmarks), which the reader takes headings from;
- DOCX: python-docx with Word's Heading N and List Bullet styles.

Each rendering is then ingested into a schema of its own and every case of `evals/cases.jsonl` is asked
through the pipeline `provenance evals` runs (local profile unless PROFILE says otherwise, at the
configured k; no k sweep). The bar: fabrication stays 0%, and answered-correctly within 5 points of the
Markdown corpus's. The report (evals/results-formats.md) gives each format's figures and every case whose
outcome differs from the Markdown corpus's. Never part of `make test`: Chromium prints the PDFs (about a
second a chapter) and the cases run five times (about a minute in all on two cores).
"""

from __future__ import annotations

import argparse
import asyncio
import shutil
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from provenance.evaluation.cases import CaseResult, load_cases
from provenance.evaluation.runner import ingested_pipeline, run_cases
from provenance.evaluation.scoring import Score, score
from provenance.inference.embedder import Embedder
from provenance.ingest.chunking import chunk_blocks
from provenance.ingest.folder import read_sources
from provenance.ports import Profile
from provenance.report import cell, cli_settings, pct, shown, table
from provenance.settings import REPO_ROOT, Settings
from tests.ingest.documents_support import html_to_pdf, markdown_to_docx, markdown_to_html

DEFAULT_CORPUS = REPO_ROOT / "corpus"
DEFAULT_CASES = REPO_ROOT / "evals" / "cases.jsonl"
DEFAULT_OUT = REPO_ROOT / "evals" / "results-formats.md"
# (label, suffix); Markdown first: every other format is compared with it.
FORMATS = (
    ("Markdown", ".md"),
    ("HTML", ".html"),
    ("PDF", ".pdf"),
    ("PDF with outline", ".pdf"),
    ("DOCX", ".docx"),
)
MAX_DROP_POINTS = 5.0


@dataclass
class FormatRun:
    label: str
    files: int
    passages: int
    results: list[CaseResult]

    @property
    def score(self) -> Score:
        return score(self.results)


def _title(markdown: str) -> str | None:
    for line in markdown.splitlines():
        if line.startswith("# "):
            return line[2:].strip()
    return None


async def render_corpus(corpus: Path, dest: Path, label: str) -> Path:
    """`corpus` as `label` in `dest`: each document rendered, every other file (the README, the coverage
    map, the example questions) copied as it is."""
    dest.mkdir(parents=True, exist_ok=True)
    documents, _ = read_sources(corpus)
    rendered = {d.name for d in documents}
    for path in sorted(corpus.rglob("*")):
        name = path.relative_to(corpus).as_posix()
        if path.is_file() and name not in rendered:
            (dest / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(path, dest / name)
    for document in documents:
        markdown, stem = document.text, dest / Path(document.name).with_suffix("")
        stem.parent.mkdir(parents=True, exist_ok=True)
        if label == "Markdown":
            stem.with_suffix(".md").write_text(markdown, encoding="utf-8")
        elif label == "HTML":
            page = markdown_to_html(markdown, title=_title(markdown), boilerplate=True)
            stem.with_suffix(".html").write_text(page, encoding="utf-8")
        elif label.startswith("PDF"):
            await html_to_pdf(markdown_to_html(markdown), stem.with_suffix(".pdf"), outline=label != "PDF")
        elif label == "DOCX":
            markdown_to_docx(markdown, stem.with_suffix(".docx"))
        else:
            raise ValueError(f"unknown format {label}")
    return dest


def count_passages(folder: Path, embedder: Embedder, max_tokens: int) -> tuple[int, int]:
    """(documents, passages) as ingest cuts them."""
    files, skipped = read_sources(folder)
    if skipped:
        raise RuntimeError(f"{folder}: ingest skipped {skipped}")
    chunks = [c for f in files for c in chunk_blocks(f.name, f.blocks, embedder.count_tokens, max_tokens)]
    return len(files), len(chunks)


async def run_formats(
    settings: Settings, corpus: Path, cases_path: Path, embedder: Embedder, profile: Profile, work: Path
) -> list[FormatRun]:
    cases = load_cases(cases_path)
    runs = []
    for label, _ in FORMATS:
        started = time.monotonic()
        folder = await render_corpus(corpus, work / label.lower().replace(" ", "-"), label)
        files, passages = count_passages(folder, embedder, settings.ingest.chunk_max_tokens)
        async with ingested_pipeline(settings, folder, embedder, profile) as pipeline:
            results = await run_cases(pipeline, cases, label, show_progress=False)
        run = FormatRun(label, files, passages, results)
        s = run.score
        print(
            f"{label}: {passages} passages, fabrication {pct(s.fabrication_rate)}, false refusal "
            f"{pct(s.false_refusal_rate)}, answered correctly {pct(s.answered_correctly)} "
            f"({time.monotonic() - started:.0f} s)",
            file=sys.stderr,
        )
        runs.append(run)
    return runs


def verdict(run: FormatRun, baseline: FormatRun) -> tuple[bool, float]:
    """(meets the bar, answered-correctly points against the baseline)."""
    s, b = run.score, baseline.score
    delta = 100 * ((s.answered_correctly or 0.0) - (b.answered_correctly or 0.0))
    return (s.fabrication_rate or 0.0) == 0.0 and delta >= -MAX_DROP_POINTS, delta


def _outcome(r: CaseResult) -> str:
    if r.expect == "answer" and r.status == "answered":
        return "answered, right" if r.answer_correct else "answered, lacks the reference"
    return r.status


def render(
    runs: Sequence[FormatRun], settings: Settings, profile: str, corpus: Path, cases_path: Path, elapsed_s: float
) -> str:
    baseline = runs[0]
    lines = [
        "# Format check: the corpus as HTML, PDF and Word",
        "",
        f"`{shown(corpus)}` rendered to each format by `evals/formats.py` (how each is made is in its "
        f"docstring), ingested and asked every case of `{shown(cases_path)}` ({baseline.score.n} cases). "
        f"Profile `{profile}`, k = {settings.retrieval.k}, retrieval `{settings.retrieval.mode}`. Generated "
        f"by `python -m evals.formats` in {elapsed_s:.0f} s; every figure below is what that run produced.",
        "",
        f"The bar: fabrication 0%, and answered correctly within {MAX_DROP_POINTS:.0f} points of the "
        "Markdown corpus's.",
        "",
    ]
    figures = []
    for run in runs:
        s = run.score
        met, delta = verdict(run, baseline)
        vs = "" if run is baseline else f"{delta:+.1f} pts"
        bar = "" if run is baseline else ("met" if met else "**missed**")
        rates = (s.fabrication_rate, s.false_refusal_rate, s.answered_correctly)
        figures.append([run.label, run.files, run.passages, *map(pct, rates), vs, bar])
    head = (
        "format",
        "documents",
        "passages",
        "fabrication",
        "false refusal",
        "answered correctly",
        "vs Markdown",
        "bar",
    )
    lines += table(head, "lrrrrrrl", figures)
    lines += [
        "",
        "False refusal is of the answerable and partial cases; answered correctly is the share of those "
        "answered with a reference answer (`provenance.evaluation.scoring.score`).",
        "",
        "## Cases whose outcome differs from the Markdown corpus's",
        "",
    ]
    base = {r.id: r for r in baseline.results}
    rows = []
    for run in runs[1:]:
        for r in run.results:
            b = base[r.id]
            if _outcome(r) != _outcome(b):
                rows.append([run.label, r.id, _outcome(b), _outcome(r), r.reason or "", cell(r.question)])
    if rows:
        lines += table(("format", "case", "Markdown", "this format", "reason", "question"), "llllll", rows)
    else:
        lines.append("None: every case has the same outcome in every format.")
    return "\n".join(lines) + "\n"


def main(argv: Sequence[str] | None = None) -> int:
    from provenance.services import build_profile, load_embedder

    parser = argparse.ArgumentParser(prog="python -m evals.formats", description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--corpus", type=Path, default=DEFAULT_CORPUS, help="the Markdown corpus to render")
    parser.add_argument("--cases", type=Path, default=DEFAULT_CASES, help="cases JSONL")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="Markdown report")
    parser.add_argument("--keep", type=Path, default=None, help="write the renderings here and keep them")
    args = parser.parse_args(argv)
    settings = cli_settings()
    if settings is None:
        return 2
    started = time.monotonic()
    embedder = load_embedder(settings)
    profile = build_profile(settings, embedder)
    with tempfile.TemporaryDirectory(prefix="provenance-formats-") as tmp:
        work = args.keep or Path(tmp)
        runs = asyncio.run(run_formats(settings, args.corpus, args.cases, embedder, profile, work))
    out: Path = args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        render(runs, settings, profile.name, args.corpus, args.cases, time.monotonic() - started), encoding="utf-8"
    )
    missed = [run.label for run in runs[1:] if not verdict(run, runs[0])[0]]
    outcome = "missed the bar: " + ", ".join(missed) if missed else "every format met the bar"
    print(f"report: {shown(out)}; {outcome}")
    return 1 if missed else 0


if __name__ == "__main__":
    raise SystemExit(main())
