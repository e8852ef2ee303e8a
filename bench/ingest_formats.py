"""Ingest by format: passages a second for a PDF, an HTML page and a Word file of about 200 pages each, and
the peak memory of ingesting PDFs of 50, 200 and 800 pages.

    .venv/bin/python -m bench.ingest_formats [--no-write]

Part of `make bench` (bench/run.py); alone, it starts its own embedded Postgres and rewrites only its
section of docs/benchmarks.md.

The documents are generated: the corpus chapters' sections, cycled (each pass's headings numbered, so every
section is a passage of its own) under one title until the text is long enough, written as Markdown and
rendered by tests/ingest/documents_support.py as the format check renders the corpus: HTML by hand, the PDF
printed from that HTML by Chromium (A5, a narrow hyphenated column, running header and footer, no outline:
headings by font size), DOCX by python-docx. The HTML and DOCX hold the same text as the ~200-page PDF.

Throughput is measured twice a format: the read-and-chunk path alone (the format's reader and the chunker
with the embedder's tokenizer, in this process), and a whole forced ingest into a scratch schema (read,
chunk, embed every passage, store), where embedding dominates. Memory: each PDF is ingested whole in a
subprocess of its own, which reports its peak RSS (VmHWM) when the embedder is asked for (imports and
reading the file; the model loads after) and at the end (chunking, embedding, storing).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import resource
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from bench.common import embedded_data_dir, scratch_store
from bench.server import REPO_ROOT
from provenance.inference.embedder import Embedder
from provenance.ingest.chunking import chunk_blocks
from provenance.ingest.documents.read import read_document
from provenance.ingest.folder import ingest, read_sources
from provenance.report import table

DOC = REPO_ROOT / "docs" / "benchmarks.md"
HEADING = "## Ingest by format"
THROUGHPUT_PAGES = 200
MEMORY_PAGES = (50, 200, 800)
TARGET_GROWTH_MIB = 100.0
# Words a printed A5 page of the generated book holds in the PDF's narrow column (4,054 words of corpus/ print as 28
# pages; the book's longer sections fill pages better).
WORDS_PER_PAGE = 155


@dataclass
class Throughput:
    fmt: str
    pages: int | None  # printed pages (the PDF); the others hold the same text
    size_mib: float
    passages: int
    read_s: float
    ingest_s: float | None = None
    embedded: int = 0


@dataclass
class Memory:
    pages: int
    size_mib: float
    passages: int
    reading_mib: float
    peak_mib: float
    seconds: float


@dataclass
class FormatsReport:
    load_before: str = ""
    throughput: list[Throughput] = field(default_factory=list)
    memory: list[Memory] = field(default_factory=list)
    skipped: str = ""
    alone: bool = False  # run by itself (`python -m bench.ingest_formats`), not as part of `make bench`


def log(message: str) -> None:
    print(message, flush=True)


# --- the documents ------------------------------------------------------------------------------------


def _sections(corpus: Path) -> list[tuple[str, str]]:
    """(chapter title, section Markdown from its `##` line) for every section of every corpus document."""
    files, _ = read_sources(corpus)
    out = []
    for f in files:
        title = next((line[2:].strip() for line in f.text.splitlines() if line.startswith("# ")), f.name)
        for part in re.split(r"(?m)^(?=## )", f.text):
            if part.startswith("## "):
                out.append((title, part.strip()))
    return out


def book(words: int, corpus: Path = REPO_ROOT / "corpus") -> str:
    """A handbook of about `words` words: the corpus's sections cycled, each pass's headings numbered."""
    sections = _sections(corpus)
    parts, count, n = ["# Foundry Commons Handbook, collected edition"], 0, 0
    while count < words:
        chapter, text = sections[n % len(sections)]
        edition = n // len(sections) + 1
        heading, _, rest = text.partition("\n")
        parts.append(f"{heading} ({chapter}, part {edition})\n{rest}")
        count += len(text.split())
        n += 1
    return "\n\n".join(parts) + "\n"


async def write_pdf(markdown: str, out: Path) -> int:
    """Print `markdown` as the format check does; the number of pages printed."""
    import pypdf

    from tests.ingest.documents_support import html_to_pdf, markdown_to_html

    await html_to_pdf(markdown_to_html(markdown), out)
    return len(pypdf.PdfReader(out).pages)


# --- throughput -----------------------------------------------------------------------------------------


def read_and_chunk(path: Path, embedder: Embedder, max_tokens: int) -> tuple[int, float]:
    """(passages, seconds) of the format's reader and the chunker on one file."""
    raw = path.read_bytes()
    started = time.perf_counter()
    blocks = read_document(path.name, raw)
    chunks = chunk_blocks(path.name, blocks, embedder.count_tokens, max_tokens)
    return len(chunks), time.perf_counter() - started


async def throughput(work: Path, embedder: Embedder) -> list[Throughput]:
    from tests.ingest.documents_support import markdown_to_docx, markdown_to_html

    markdown = book(THROUGHPUT_PAGES * WORDS_PER_PAGE)
    files: dict[str, tuple[Path, int | None]] = {}
    folder = work / "throughput"
    for fmt in ("pdf", "html", "docx"):
        (folder / fmt).mkdir(parents=True)
    pdf = folder / "pdf" / "handbook.pdf"
    files["PDF"] = (pdf, await write_pdf(markdown, pdf))
    html = folder / "html" / "handbook.html"
    html.write_text(markdown_to_html(markdown), encoding="utf-8")
    files["HTML"] = (html, None)
    files["DOCX"] = (markdown_to_docx(markdown, folder / "docx" / "handbook.docx"), None)

    rows = []
    async with scratch_store() as (store, settings):
        max_tokens = settings.ingest.chunk_max_tokens
        read_and_chunk(files["HTML"][0], embedder, max_tokens)  # the tokenizer's and the parsers' first use
        for fmt, (path, pages) in files.items():
            passages, seconds = read_and_chunk(path, embedder, max_tokens)
            row = Throughput(fmt, pages, path.stat().st_size / 2**20, passages, seconds)
            started = time.perf_counter()
            result = await ingest(
                store,
                path.parent,
                lambda: embedder,
                settings.embedding.model,
                max_tokens,
                settings.retrieval.hnsw_min_passages,
                force=True,
                corpus=fmt.lower(),
            )
            row.ingest_s, row.embedded = time.perf_counter() - started, result.embedded
            rows.append(row)
            log(
                f"  {fmt}: {passages} passages, read and chunk {passages / seconds:.0f} passages/s, whole ingest "
                f"{row.embedded / row.ingest_s:.1f} passages/s"
            )
    return rows


# --- memory ---------------------------------------------------------------------------------------------


def _rss_mib() -> float:
    """This process's peak RSS so far. VmHWM, not `ru_maxrss`: Linux carries `ru_maxrss` across exec, so a
    subprocess's would start at its parent's peak (the bench's own, a gigabyte with the model loaded)."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024  # kB
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


async def _child(folder: Path) -> dict[str, float]:
    """Ingest `folder` (run in a subprocess of its own): the peak RSS before the embedder and at the end."""
    from provenance.services import load_embedder
    from provenance.settings import load_settings

    marks: dict[str, float] = {}

    def embedder_factory() -> Embedder:
        marks["reading_mib"] = _rss_mib()
        return load_embedder(load_settings())

    async with scratch_store() as (store, settings):
        started = time.perf_counter()
        result = await ingest(
            store,
            folder,
            embedder_factory,
            settings.embedding.model,
            settings.ingest.chunk_max_tokens,
            settings.retrieval.hnsw_min_passages,
        )
        seconds = time.perf_counter() - started
    return {"passages": result.passages, "seconds": seconds, "peak_mib": _rss_mib(), **marks}


async def memory(work: Path) -> list[Memory]:
    rows = []
    for pages in MEMORY_PAGES:
        folder = work / f"memory-{pages}"
        folder.mkdir(parents=True)
        path = folder / "handbook.pdf"
        printed = await write_pdf(book(pages * WORDS_PER_PAGE), path)
        proc = await asyncio.to_thread(
            subprocess.run,
            [sys.executable, "-m", "bench.ingest_formats", "--child", str(folder)],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=False,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"ingest of {printed} pages failed:\n{proc.stderr[-2000:]}")
        out = json.loads(proc.stdout.strip().splitlines()[-1])
        row = Memory(
            printed,
            path.stat().st_size / 2**20,
            int(out["passages"]),
            out["reading_mib"],
            out["peak_mib"],
            out["seconds"],
        )
        rows.append(row)
        log(
            f"  {printed} pages: {row.passages} passages, peak RSS {row.reading_mib:.0f} MiB reading, "
            f"{row.peak_mib:.0f} MiB whole ingest ({row.seconds:.0f} s)"
        )
    return rows


async def measure(embedder: Embedder, load_average: Callable[[], str]) -> FormatsReport:
    from tests.ingest.documents_support import CHROMIUM

    report = FormatsReport(load_before=load_average())
    if not CHROMIUM.exists():
        report.skipped = f"{CHROMIUM} is not installed (`make chromium`): nothing measured"
        return report
    with tempfile.TemporaryDirectory(prefix="provenance-formats-") as tmp:
        log(f"ingest by format: about {THROUGHPUT_PAGES} pages each")
        report.throughput = await throughput(Path(tmp), embedder)
        log(f"ingest's peak RSS for PDFs of {', '.join(map(str, MEMORY_PAGES))} pages (a subprocess each)")
        report.memory = await memory(Path(tmp))
    return report


# --- the report -----------------------------------------------------------------------------------------


def section(report: FormatsReport) -> str:
    lines = [
        HEADING,
        "",
        "`bench/ingest_formats.py`: a generated handbook (the corpus's sections cycled, headings numbered) as "
        "a PDF printed by Chromium (A5, narrow hyphenated column, running header and footer, no outline), an "
        "HTML page and a Word file holding the same text. *Read and chunk* is the format's reader and the "
        "chunker with the embedder's tokenizer, in process; *whole ingest* is a forced ingest of the one file "
        "into a scratch schema (read, chunk, embed every passage with the offline MiniLM model, store), so "
        "embedding sets its pace.",
        "",
    ]
    if report.skipped:
        return "\n".join([*lines, f"({report.skipped}.)", ""])
    alone = (
        " This section was measured alone (`python -m bench.ingest_formats`), not in the run the rest of "
        "this page comes from."
        if report.alone
        else ""
    )
    lines += [
        f"Load average (1/5/15 min) when this part started: {report.load_before}.{alone}",
        "",
    ]
    rows = []
    for t in report.throughput:
        pages = str(t.pages) if t.pages is not None else "(same text)"
        ingest_s = t.ingest_s or 0.0
        rates = (f"{t.passages / t.read_s:.0f}", f"{ingest_s:.1f}", f"{t.embedded / ingest_s if ingest_s else 0:.1f}")
        rows.append([t.fmt, pages, f"{t.size_mib:.1f} MiB", t.passages, f"{t.read_s:.2f}", *rates])
    head = (
        "format",
        "pages",
        "file",
        "passages",
        "read and chunk s",
        "read and chunk passages/s",
        "whole ingest s",
        "whole ingest passages/s",
    )
    lines += table(head, "lrrrrrrr", rows)
    lines += [
        "",
        "Peak resident memory of `ingest` on one PDF, each in a fresh subprocess (its VmHWM): when the "
        "embedder is asked for (the interpreter, the imports and the file read into lines) and at the end "
        "(the model loaded, every passage chunked, embedded and stored).",
        "",
        *table(
            ("pages", "file", "passages", "peak RSS after reading", "peak RSS, whole ingest", "seconds"),
            "rrrrrr",
            (
                [
                    m.pages,
                    f"{m.size_mib:.1f} MiB",
                    m.passages,
                    f"{m.reading_mib:.0f} MiB",
                    f"{m.peak_mib:.0f} MiB",
                    f"{m.seconds:.0f}",
                ]
                for m in report.memory
            ),
        ),
        "",
    ]
    if len(report.memory) >= 2:
        first, last = report.memory[0], report.memory[-1]
        growth = last.peak_mib - first.peak_mib
        met = growth < TARGET_GROWTH_MIB
        lines.append(
            f"From {first.pages} to {last.pages} pages the peak grew by **{growth:.0f} MiB** (while reading: "
            f"{last.reading_mib - first.reading_mib:.0f} MiB). Target: less than {TARGET_GROWTH_MIB:.0f} MiB: "
            f"**{'met' if met else 'not met'}**."
        )
        lines.append("")
    return "\n".join(lines)


def replace_section(doc: str, text: str) -> str:
    """`doc` with its ingest-by-format section replaced by `text` (or added after the Ingest section)."""
    start = doc.find(HEADING + "\n")
    if start < 0:
        anchor = doc.find("\n## ", doc.find("## Ingest\n"))
        start = end = anchor + 1 if anchor >= 0 else len(doc)
    else:
        nxt = doc.find("\n## ", start + len(HEADING))
        end = nxt + 1 if nxt >= 0 else len(doc)
    return doc[:start] + text.rstrip("\n") + "\n\n" + doc[end:]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--no-write", action="store_true", help="print only; leave docs/benchmarks.md alone")
    parser.add_argument("--child", type=Path, help=argparse.SUPPRESS)  # one measured ingest, as a subprocess
    args = parser.parse_args(argv)
    from provenance.logs import configure_logging

    configure_logging("warning")
    if args.child:
        print(json.dumps(asyncio.run(_child(args.child))))
        return 0

    from bench import scaling
    from provenance.services import load_embedder
    from provenance.settings import Settings

    with embedded_data_dir("provenance-bench-formats-") as data_dir:
        embedder = load_embedder(Settings(data_dir=data_dir))
        report = asyncio.run(measure(embedder, scaling.load_average))
    report.alone = True
    text = section(report)
    print(text)
    if not args.no_write:
        DOC.write_text(replace_section(DOC.read_text(), text))
        log(f"wrote its section of {DOC.relative_to(REPO_ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
