"""Negative rejection: an answerable question whose paragraph is taken out of the corpus must be refused.

    .venv/bin/python -m evals.negative_rejection [--suite DIR] [--out FILE] [--limit N]

Built at run time from a SQuAD-style suite (`DIR/corpus/`, its files split into `##` sections, and `DIR/cases.jsonl`):
for every answerable case, each section that contains one of its `mustIncludeAny` strings (case-insensitive,
the same test `answer_matches` applies to answers) is removed, and the case is asked again with
`expect: refuse`. Cases that remove the same sections share one reduced corpus, ingested once into a schema
of its own and dropped afterwards, through the same in-process pipeline `provenance evals` uses. The
reduced corpora live in a temporary directory only; nothing generated here is committed. The report gives
N, the fabrication rate (answered although the answer's paragraph was removed) and every fabricated case.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import msgspec

from provenance.evaluation.cases import Case, CaseResult, load_cases
from provenance.evaluation.runner import ingested_pipeline, run_cases
from provenance.evaluation.scoring import THRESHOLDS, rescore, score
from provenance.inference.embedder import Embedder
from provenance.ingest.folder import read_sources
from provenance.ports import Profile
from provenance.report import ProgressBar, cell, cli_settings, pct, shown, table
from provenance.settings import REPO_ROOT, Settings

DEFAULT_SUITE = REPO_ROOT.parent / "shared" / "benchmarks" / "squad2-normans"
DEFAULT_OUT = REPO_ROOT / "evals" / "external" / "squad2-normans-negative.md"
BUCKET = "negative-rejection"
_SECTION_START = re.compile(r"^## ", re.MULTILINE)


# --- generation (pure) ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Section:
    file: str
    title: str
    text: str  # the heading line and everything up to the next `## ` heading

    @property
    def key(self) -> str:
        return f"{self.file}#{self.title}"


@dataclass(frozen=True)
class CorpusFile:
    name: str
    preamble: str  # text before the first `## ` heading, kept in every reduced corpus
    sections: tuple[Section, ...]


def split_sections(name: str, text: str) -> CorpusFile:
    starts = [m.start() for m in _SECTION_START.finditer(text)]
    if not starts:
        return CorpusFile(name, text, ())
    bounds = [*starts, len(text)]
    sections = []
    for start, end in pairwise(bounds):
        chunk = text[start:end]
        title = chunk.splitlines()[0][3:].strip()
        sections.append(Section(name, title, chunk))
    return CorpusFile(name, text[: starts[0]], tuple(sections))


def read_corpus(directory: Path) -> list[CorpusFile]:
    """The files ingest would read (same reader, so ignored and unreadable files stay out), split."""
    files, _ = read_sources(directory)
    return [split_sections(f.name, f.text) for f in files]


def sections_holding(files: Sequence[CorpusFile], must_include_any: Sequence[str]) -> frozenset[str]:
    """Keys of every section that contains one of the strings, compared case-insensitively."""
    needles = [m.lower() for m in must_include_any if m.strip()]
    return frozenset(s.key for f in files for s in f.sections if any(n in s.text.lower() for n in needles))


@dataclass(frozen=True)
class Group:
    removed: tuple[str, ...]  # section keys, in corpus order
    cases: tuple[Case, ...]  # rewritten to expect a refusal


@dataclass(frozen=True)
class Skipped:
    case: Case
    why: str


@dataclass(frozen=True)
class Plan:
    groups: tuple[Group, ...]
    skipped: tuple[Skipped, ...]

    @property
    def n_cases(self) -> int:
        return sum(len(g.cases) for g in self.groups)


def plan(files: Sequence[CorpusFile], cases: Sequence[Case]) -> Plan:
    """The negative suite: answerable cases grouped by the sections their answers sit in.

    A case whose strings occur in no section cannot be made unanswerable this way, and one whose strings
    occur in every section would leave no corpus; both are skipped, with the reason."""
    order = [s.key for f in files for s in f.sections]
    by_removed: dict[frozenset[str], list[Case]] = {}
    skipped = []
    for case in cases:
        if case.expect != "answer":
            continue
        removed = sections_holding(files, case.mustIncludeAny or [])
        if not removed:
            skipped.append(Skipped(case, "no section holds any of its mustIncludeAny strings"))
            continue
        if len(removed) == len(order):
            skipped.append(Skipped(case, "every section holds one of its mustIncludeAny strings"))
            continue
        negative = msgspec.structs.replace(case, bucket=BUCKET, expect="refuse")
        by_removed.setdefault(removed, []).append(negative)
    groups = [Group(tuple(k for k in order if k in removed), tuple(cs)) for removed, cs in by_removed.items()]
    return Plan(tuple(groups), tuple(skipped))


def write_reduced_corpus(files: Sequence[CorpusFile], removed: Sequence[str], directory: Path) -> None:
    """Writes the corpus without the removed sections; every other byte is kept as it was."""
    gone = set(removed)
    directory.mkdir(parents=True, exist_ok=True)
    for f in files:
        path = directory / f.name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f.preamble + "".join(s.text for s in f.sections if s.key not in gone), encoding="utf-8")


# --- running --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class GroupResult:
    group: Group
    results: list[CaseResult]


async def run_plan(
    settings: Settings, files: Sequence[CorpusFile], suite_plan: Plan, embedder: Embedder, profile: Profile
) -> list[GroupResult]:
    out: list[GroupResult] = []
    bar = ProgressBar(suite_plan.n_cases, "negative rejection", stream=sys.stderr)
    done = 0
    with tempfile.TemporaryDirectory(prefix="provenance-negative-") as tmp:
        for i, group in enumerate(suite_plan.groups, start=1):
            corpus = Path(tmp) / f"corpus-{i:03d}"
            write_reduced_corpus(files, group.removed, corpus)
            started = time.monotonic()
            async with ingested_pipeline(settings, corpus, embedder, profile) as pipeline:
                results = await run_cases(pipeline, group.cases, show_progress=False)
            out.append(GroupResult(group, results))
            done += len(results)
            if bar.enabled:
                bar.advance(len(results))
            else:
                answered = sum(r.status == "answered" for r in results)
                print(
                    f"negative rejection: corpus {i}/{len(suite_plan.groups)} "
                    f"({len(group.removed)} section(s) removed): {len(results)} case(s), {answered} answered "
                    f"· {done}/{suite_plan.n_cases} · {time.monotonic() - started:.1f} s",
                    file=sys.stderr,
                    flush=True,
                )
    bar.close()
    return out


# --- report ---------------------------------------------------------------------------------------


def _titles(keys: Sequence[str]) -> str:
    return "; ".join(k.split("#", 1)[1] for k in keys)


def render(
    suite: Path,
    suite_plan: Plan,
    outcome: Sequence[GroupResult],
    settings: Settings,
    profile: str,
    limit: int | None,
    elapsed_s: float,
) -> str:
    results = [r for g in outcome for r in g.results]
    removed_for = {r.id: g.group.removed for g in outcome for r in g.results}
    s = score(results)
    fabricated = [r for r in results if r.fabricated]
    reasons: dict[str, int] = {}
    for r in results:
        if r.status != "answered":
            key = f"{r.status} ({r.reason})" if r.reason else r.status
            reasons[key] = reasons.get(key, 0) + 1
    sizes = sorted(len(g.group.removed) for g in outcome)
    lines = [
        f"# Negative rejection: {suite.name}",
        "",
        f"Suite `{shown(suite)}`{f', first {limit} answerable cases' if limit else ''}. "
        "Each answerable case is asked "
        "again over the corpus without every `##` section that contains one of its `mustIncludeAny` strings "
        "(case-insensitive), and must be refused. "
        f"Profile `{profile}`, k = {settings.retrieval.k}, retrieval `{settings.retrieval.mode}`, gate mean ≥ "
        f"{settings.gate.threshold:.2f} and weakest claim ≥ {settings.gate.min_claim:.2f}. Generated by "
        f"`python -m evals.negative_rejection` in {elapsed_s:.0f} s; every figure below is what that run produced.",
        "",
        f"**Fabrication rate: {pct(s.fabrication_rate)}** ({len(fabricated)} of {s.n} answered although the "
        "paragraph holding the answer was removed)",
        "",
        f"- Cases: {s.n}, over {len(outcome)} reduced corpora (sections removed per corpus: "
        + (f"median {sizes[len(sizes) // 2]}, max {sizes[-1]}" if sizes else "none")
        + f"); mean {s.mean_ms:.0f} ms, p95 {s.p95_ms:.0f} ms per question.",
        f"- Skipped: {len(suite_plan.skipped)}"
        + "".join(f"\n  - `{k.case.id}` ({cell(k.case.question)}): {k.why}" for k in suite_plan.skipped),
        "- Not answered: " + (", ".join(f"{n} {k}" for k, n in sorted(reasons.items())) if reasons else "none") + ".",
        "",
        "## Threshold sweep",
        "",
        "Re-scored from the stored claim scores, as in `provenance evals`: the threshold is both the mean-support "
        f"and the relevance threshold; the weakest-claim threshold stays at {settings.gate.min_claim:.2f}.",
        "",
        *table(
            ("threshold", "fabrication"),
            "rr",
            ([f"{t:.2f}", pct(score(rescore(results, settings.gate, t)).fabrication_rate)] for t in THRESHOLDS),
        ),
    ]
    lines += ["", f"## Fabricated cases ({len(fabricated)})", ""]
    if not fabricated:
        lines.append("None.")
    else:
        rows = []
        for r in fabricated:
            g = "" if r.groundedness is None else f"{r.groundedness:.2f}"
            m = "" if r.min_claim is None else f"{r.min_claim:.2f}"
            claims = ", ".join(
                f"{s:.2f} / {rel:.2f}" for s, rel in zip(r.claim_support, r.claim_relevance, strict=True)
            )
            ref = " / ".join(r.must_include_any or [])
            removed = _titles(removed_for[r.id])
            rows.append([r.id, cell(r.question), cell(removed), cell(ref), cell(r.answer), g, m, claims])
        head = (
            "id",
            "question",
            "removed sections",
            "reference",
            "answer",
            "support (mean)",
            "weakest claim",
            "claims (support / relevance)",
        )
        lines += table(head, "lllllrrl", rows)
    return "\n".join(lines) + "\n"


# --- command line ---------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    from provenance.services import build_profile, load_embedder

    parser = argparse.ArgumentParser(
        prog="python -m evals.negative_rejection", description=(__doc__ or "").split("\n")[0]
    )
    parser.add_argument("--suite", type=Path, default=DEFAULT_SUITE, help="suite folder: corpus/ and cases.jsonl")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="Markdown report")
    parser.add_argument("--limit", type=int, default=None, help="only the first N answerable cases")
    args = parser.parse_args(argv)

    suite: Path = args.suite
    corpus_dir, cases_path = suite / "corpus", suite / "cases.jsonl"
    if not corpus_dir.is_dir() or not cases_path.is_file():
        print(f"error: {suite} needs corpus/ and cases.jsonl", file=sys.stderr)
        return 2
    settings = cli_settings()
    if settings is None:
        return 2

    started = time.monotonic()
    files = read_corpus(corpus_dir)
    answerable = [c for c in load_cases(cases_path) if c.expect == "answer"]
    if args.limit is not None:
        answerable = answerable[: args.limit]
    suite_plan = plan(files, answerable)
    print(
        f"negative rejection: {suite_plan.n_cases} case(s) over {len(suite_plan.groups)} reduced corpora, "
        f"{len(suite_plan.skipped)} skipped",
        file=sys.stderr,
    )
    embedder = load_embedder(settings)
    profile = build_profile(settings, embedder)
    outcome = asyncio.run(run_plan(settings, files, suite_plan, embedder, profile))

    out: Path = args.out
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        render(suite, suite_plan, outcome, settings, profile.name, args.limit, time.monotonic() - started),
        encoding="utf-8",
    )
    s = score([r for g in outcome for r in g.results])
    print(f"{s.n} cases: fabrication {pct(s.fabrication_rate)}")
    print(f"report: {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
