"""The hosted path measured end to end with scripted model outputs (issue 23, item 3).

    .venv/bin/python -m evals.hosted [--out evals/hosted.md] [--json FILE] [--limit N] [--ids ID,ID]
        [--corpus DIR --cases FILE [--cases FILE ...] --scripts FILE]

The `anthropic` profile runs through the real `anthropic` SDK against the fake Messages API of
`tests/fake_anthropic.py` on loopback, over a corpus (`corpus/` unless --corpus) ingested into a throwaway
schema by the same in-process pipeline `provenance evals` uses (cache off, no guards). What the "model" says
comes from a scripts file, written by hand and committed before any tuning; it is read as written and never
edited. By default `evals/hosted-scripts.jsonl`, for every answerable case of `evals/cases.jsonl` and
`evals/paraphrase.jsonl`; `evals/hosted-scripts-18f.jsonl` is the same for the 18F handbook suite
(`--corpus ../shared/corpora/18f-handbook/pages --cases evals/18f-handbook.jsonl`).

Each case is asked four times:

- (a) faithful: the right facts, reworded as a model would write them;
- (b) fabricated: one fact wrong, which the model calls supported;
- (c1) off the question, honest verdict: a true sentence that doesn't answer, relevance 0.05;
- (c2) off the question, wrong verdict: the same sentence, called relevant (0.95).

The fake screens every question "ok"; generates the scripted answer, citing the scripted passages that are in
its prompt (else the prompt's passages from the same file, else none); and returns the scripted claims with
supported_probability 0.95, those passage ids, and relevance_probability 0.95 (0.05 in c1). A scripted passage
id the corpus doesn't have (scripts written for another reader's ids) is never in a prompt, so it takes that
fallback; the report names every such id. The report gives, per kind and per suite, how many were answered,
refused (by the judgment that failed) and blocked, and every case that missed its kind's target with the
figures that decided it.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import subprocess
import sys
import time
import traceback
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal, TextIO

import msgspec

from provenance import text as T
from provenance.evaluation.cases import Case, load_cases, load_jsonl
from provenance.evaluation.runner import ingested_pipeline
from provenance.inference.embedder import Embedder
from provenance.pipeline.run import WITHHELD
from provenance.ports import Profile
from provenance.profiles.outputs import ANSWER_TOOL, CHECKED_CLAIMS_TOOL, SCREEN_TOOL
from provenance.report import ProgressBar, cell, cli_settings, pct_of, shown, table
from provenance.settings import REPO_ROOT, Settings
from provenance.wire import AskResponse, ClaimResult
from tests.fake_anthropic import PASSAGE_TAG, FakeAnthropic, RecordedRequest, Reply, default_responder

SCRIPTS = REPO_ROOT / "evals" / "hosted-scripts.jsonl"
CASE_FILES = (REPO_ROOT / "evals" / "cases.jsonl", REPO_ROOT / "evals" / "paraphrase.jsonl")
DEFAULT_OUT = REPO_ROOT / "evals" / "hosted.md"
SUPPORTED = 0.95
RELEVANT = 0.95
NOT_RELEVANT = 0.05
# Generous: the fake answers at once, but the local verifier shares two busy cores with it.
MODEL_TIMEOUT_S = 60.0

Kind = Literal["faithful", "fabricated", "off_honest", "off_wrong"]
ALL_KINDS: tuple[Kind, ...] = ("faithful", "fabricated", "off_honest", "off_wrong")
KINDS: tuple[Kind, ...] = ALL_KINDS
LABEL: dict[Kind, str] = {
    "faithful": "(a) faithful",
    "fabricated": "(b) fabricated",
    "off_honest": "(c1) off the question, honest verdict",
    "off_wrong": "(c2) off the question, verdict wrongly relevant",
}


# --- the scripts --------------------------------------------------------------------------------


class Script(msgspec.Struct, frozen=True):
    answer: str
    claims: list[str]
    passages: list[str]
    kind: str | None = None  # fabricated only: what sort of wrong fact
    changed: str | None = None  # fabricated only: what is wrong, in words


class ScriptRow(msgspec.Struct, frozen=True):
    id: str
    suite: str  # the suite the case is from, as the report groups it: cases, paraphrase, 18f
    faithful: Script
    fabricated: Script
    offQuestion: Script

    def script(self, kind: Kind) -> Script:
        if kind == "faithful":
            return self.faithful
        if kind == "fabricated":
            return self.fabricated
        return self.offQuestion


def load_scripts(path: Path) -> list[ScriptRow]:
    return load_jsonl(path, ScriptRow)


def load_questions(paths: Sequence[Path] = CASE_FILES) -> dict[str, Case]:
    return {case.id: case for path in paths for case in load_cases(path)}


# --- the scripted model -------------------------------------------------------------------------


@dataclass
class Turn:
    """One ask: what the fake was told to say, and what it saw and said."""

    script: Script
    relevance: float
    tools: list[str] = field(default_factory=list)
    generation_ids: list[str] = field(default_factory=list)  # passages in the generation prompt
    cited: list[str] = field(default_factory=list)  # used_passage_ids the generator gave
    claims_passages: dict[str, str] = field(default_factory=dict)  # id -> text, in the claims prompt
    claims_cited: list[str] = field(default_factory=list)  # supporting_passage_ids the claims call gave


def cite(scripted: Sequence[str], in_prompt: Sequence[str]) -> list[str]:
    """The scripted passages that are in the prompt; failing those, the prompt's passages from the same
    files; failing those, none."""
    exact = [pid for pid in scripted if pid in in_prompt]
    if exact:
        return exact
    files = {pid.split("#", 1)[0] for pid in scripted}
    return [pid for pid in in_prompt if pid.split("#", 1)[0] in files]


class ScriptedModel:
    """The fake's responder: answers the current turn's script. Asks run one at a time, so one turn is live."""

    def __init__(self) -> None:
        self.turn: Turn | None = None

    def __call__(self, request: RecordedRequest) -> Reply:
        turn = self.turn
        tool = request.tool_name
        if turn is None:
            return default_responder(request)
        turn.tools.append(tool or "?")
        if tool == SCREEN_TOOL:
            return Reply(tool_input={"label": "ok", "confidence": 0.9})
        passages: list[tuple[str, str]] = PASSAGE_TAG.findall(request.user_text)
        ids = [pid for pid, _ in passages]
        if tool == ANSWER_TOOL:
            turn.generation_ids = ids
            turn.cited = cite(turn.script.passages, ids)
            return Reply(tool_input={"answer": turn.script.answer, "used_passage_ids": turn.cited})
        if tool == CHECKED_CLAIMS_TOOL:
            turn.claims_passages = dict(passages)
            turn.claims_cited = cite(turn.script.passages, ids)
            claims = [
                {
                    "claim": claim,
                    "supported_probability": SUPPORTED,
                    "supporting_passage_ids": turn.claims_cited,
                    "relevance_probability": turn.relevance,
                }
                for claim in turn.script.claims
            ]
            return Reply(tool_input={"claims": claims})
        return default_responder(request)


# --- what the question names that the support lacks --------------------------------------------

_YEAR = re.compile(r"\b(1[0-9]{3}|20[0-9]{2})(?:['’]?s)?(?![\w'’])")


def years(text: str) -> set[str]:
    return {m.group(1) for m in _YEAR.finditer(text)}


def question_facts_missing(question: str, claim: str, support: str) -> list[str]:
    """The years, months and numbers the question names that neither the claim nor its support passages do."""
    have = f"{support} {claim}"
    missing = (years(question) - years(have)) | (T.months(question) - T.months(have))
    missing |= T.bare_numbers(question) - T.bare_numbers(have)
    return sorted(missing)


# --- records ------------------------------------------------------------------------------------


class ClaimRecord(ClaimResult, omit_defaults=True):
    """A claim as the response gave it; a refused answer's own words come back withheld, and the text shown
    is then the scripted claim it stands for (`withheld`)."""

    withheld: bool = False


class Record(msgspec.Struct, rename="camel"):
    id: str
    suite: str
    kind: Kind
    question: str
    status: str  # answered / refused / blocked, or "error" when the ask raised
    reason: str | None = None
    failed: str | None = None  # the gate's failed judgment: support / relevance
    detail: str | None = None
    answer: str | None = None
    scripted_answer: str = ""
    scripted_claims: list[str] = msgspec.field(default_factory=list)
    scripted_passages: list[str] = msgspec.field(default_factory=list)
    retrieved: list[str] = msgspec.field(default_factory=list)  # scripted passages that were in the prompt
    # Scripted passages the ingested corpus has no passage of that id for: never in a prompt, whatever retrieval did.
    not_in_corpus: list[str] = msgspec.field(default_factory=list)
    cited: list[str] = msgspec.field(default_factory=list)
    claims: list[ClaimRecord] = msgspec.field(default_factory=list)
    dropped_claims: list[str] = msgspec.field(default_factory=list)
    model_calls: list[str] = msgspec.field(default_factory=list)
    # Off-question kinds: what the question names that the scripted claim's support lacks (the veto's test).
    question_facts_missing: list[str] = msgspec.field(default_factory=list)
    fabrication: str | None = None  # fabricated: kind and what changed
    error: str | None = None
    ms: float = 0.0

    @property
    def answered(self) -> bool:
        return self.status == "answered"


def record_of(
    row: ScriptRow,
    kind: Kind,
    question: str,
    turn: Turn,
    response: AskResponse | None,
    corpus_ids: Collection[str] = (),
) -> Record:
    script = turn.script
    missing: list[str] = []
    if kind in ("off_honest", "off_wrong"):
        support = " ".join(turn.claims_passages.get(pid, "") for pid in turn.claims_cited)
        per_claim = [question_facts_missing(question, claim, support) for claim in script.claims]
        # Like the gate's relevance rule, the answer escapes the veto when any one claim would.
        if per_claim and all(per_claim):
            missing = sorted({m for found in per_claim for m in found})
    rec = Record(
        id=row.id,
        suite=row.suite,
        kind=kind,
        question=question,
        status="error",
        scripted_answer=script.answer,
        scripted_claims=script.claims,
        scripted_passages=script.passages,
        retrieved=[pid for pid in script.passages if pid in turn.generation_ids],
        not_in_corpus=[pid for pid in script.passages if corpus_ids and pid not in corpus_ids],
        cited=turn.cited,
        model_calls=turn.tools,
        question_facts_missing=missing,
        fabrication=f"{script.kind}: {script.changed}" if kind == "fabricated" else None,
    )
    if response is None:
        return rec
    g = response.stages.gate
    rec.status = response.status
    rec.reason = response.reason
    rec.failed = g.failed
    rec.detail = g.detail or (response.headline if response.status != "answered" else None)
    rec.answer = response.answer
    rec.ms = response.total_ms
    rec.dropped_claims = list(response.stages.decomposition.dropped)
    # A refused answer's claims come back withheld, in the order of the scripted claims the decomposition kept.
    kept = [c for c in script.claims if c not in rec.dropped_claims]
    by_order = kept if len(kept) == len(g.claims) else [c.text for c in g.claims]
    rec.claims = [
        ClaimRecord(
            **(msgspec.structs.asdict(c) | {"text": scripted if c.text == WITHHELD else c.text}),
            withheld=c.text == WITHHELD,
        )
        for c, scripted in zip(g.claims, by_order, strict=True)
    ]
    return rec


# --- running ------------------------------------------------------------------------------------


class Ticker:
    """Progress on stderr: the bar on a terminal, else a plain line every few cases."""

    def __init__(self, total: int, label: str, stream: TextIO = sys.stderr) -> None:
        self.bar = ProgressBar(total, label, stream)
        self.total, self.label, self.stream = total, label, stream
        self.every = max(1, total // 20)
        self.started = time.monotonic()

    def advance(self, errors: int) -> None:
        self.bar.advance()
        done = self.bar.done
        if not self.bar.enabled and (done % self.every == 0 or done == self.total):
            elapsed = time.monotonic() - self.started
            note = f", {errors} error(s)" if errors else ""
            print(f"{self.label}: {done}/{self.total} asks, {elapsed:.0f} s{note}", file=self.stream, flush=True)

    def close(self) -> None:
        self.bar.close()


async def run_all(
    settings: Settings,
    corpus: Path,
    rows: Sequence[ScriptRow],
    questions: dict[str, Case],
    embedder: Embedder,
    profile: Profile,
    model: ScriptedModel,
) -> list[Record]:
    records: list[Record] = []
    ticker = Ticker(len(rows) * len(KINDS), "hosted")
    try:
        async with ingested_pipeline(settings, corpus, embedder, profile) as pipeline:
            corpus_ids = set(await pipeline.store.stored_hashes())
            for row in rows:
                question = questions[row.id].question
                for kind in KINDS:
                    turn = Turn(row.script(kind), NOT_RELEVANT if kind == "off_honest" else RELEVANT)
                    model.turn = turn
                    try:
                        outcome = await pipeline.ask(question, request_id=f"hosted-{row.id}-{kind}", use_cache=False)
                        rec = record_of(row, kind, question, turn, outcome.response, corpus_ids)
                    except Exception as exc:
                        rec = record_of(row, kind, question, turn, None, corpus_ids)
                        rec.error = "".join(traceback.format_exception_only(exc)).strip()
                        print(f"\n{row.id} {kind}: {rec.error}", file=sys.stderr, flush=True)
                    finally:
                        model.turn = None
                    records.append(rec)
                    ticker.advance(sum(r.status == "error" for r in records))
    finally:
        ticker.close()
    return records


# --- report -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Tally:
    n: int
    answered: int
    support: int
    relevance: int
    other: int
    blocked: int
    errors: int

    @classmethod
    def of(cls, records: Iterable[Record]) -> Tally:
        rs = list(records)
        refused = [r for r in rs if r.status == "refused"]
        return cls(
            n=len(rs),
            answered=sum(r.answered for r in rs),
            support=sum(r.failed == "support" for r in refused),
            relevance=sum(r.failed == "relevance" for r in refused),
            other=sum(r.failed not in ("support", "relevance") for r in refused),
            blocked=sum(r.status == "blocked" for r in rs),
            errors=sum(r.status == "error" for r in rs),
        )

    @property
    def refused(self) -> int:
        return self.support + self.relevance + self.other


def target(kind: Kind, t: Tally) -> tuple[str, str]:
    """The kind's target in words, and whether this run met it."""
    if t.n == 0:
        return "", "n/a"
    if kind == "faithful":
        return "≥ 95% answered", "met" if t.answered >= 0.95 * t.n else "**missed**"
    if kind == "fabricated":
        return "≤ 1% answered", "met" if t.answered <= 0.01 * t.n else "**missed**"
    if kind == "off_honest":
        return "none answered", "met" if t.answered == 0 else "**missed**"
    return "reported; the veto cases must all be caught", "see below"


def tally_row(name: str, t: Tally, extra: Sequence[str] = ()) -> list[object]:
    answered = f"{t.answered} ({pct_of(t.answered, t.n)})"
    return [name, t.n, answered, t.refused, t.support, t.relevance, t.other, t.blocked, t.errors, *extra]


def tally_table(first: str, rows: Iterable[Sequence[object]]) -> list[str]:
    head = (first, "N", "answered", "refused", "… support", "… relevance", "… other", "blocked", "errors")
    return table(head, "lrrrrrrrr", rows)


def _f(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}"


def describe(r: Record) -> list[str]:
    """One case, for the failing lists: why it went the way it did."""
    if r.status == "error":
        got = f"error: `{cell(r.error or '')}`"
    elif r.status == "refused":
        got = f"refused ({r.failed or r.reason or 'other'})"
    else:
        got = r.status + (f" ({r.reason})" if r.reason else "")
    lines = [f"- **{r.id}** ({r.suite}) {got}: “{cell(r.question)}”"]
    if r.detail:
        lines.append(f"  - gate: {cell(r.detail)}")
    if r.fabrication:
        lines.append(f"  - fabricated ({cell(r.fabrication)})")
    lines.append(f"  - scripted answer: “{cell(r.scripted_answer)}”")
    missing = [pid for pid in r.scripted_passages if pid not in r.retrieved and pid not in r.not_in_corpus]
    where = f"scripted passage(s) {', '.join(f'`{p}`' for p in r.scripted_passages)}"
    if r.not_in_corpus:
        where += f"; **not in this corpus**: {', '.join(f'`{p}`' for p in r.not_in_corpus)}"
    if missing:
        where += f"; **not retrieved**: {', '.join(f'`{p}`' for p in missing)}"
    where += f"; cited {', '.join(f'`{p}`' for p in r.cited) or 'none'}"
    lines.append(f"  - {where}")
    if r.question_facts_missing:
        lines.append(f"  - the question names {', '.join(r.question_facts_missing)}, which the claim's support lacks")
    for c in r.claims:
        caps = []
        if c.capped_by:
            caps.append(f"support capped by `{c.capped_by}`")
        if c.relevance_capped_by:
            caps.append(f"relevance capped by `{c.relevance_capped_by}`")
        if not set(c.supporting_passage_ids) <= set(r.cited):
            caps.append("judged against " + (", ".join(f"`{p}`" for p in c.supporting_passage_ids) or "no passage"))
        text = f"“{cell(c.text)}”" + (" (withheld in the response)" if c.withheld else "")
        lines.append(
            f"  - claim {text}: support **{_f(c.support)}** (local {_f(c.local_support)}, model "
            f"{_f(c.model_support)}), relevance **{_f(c.relevance)}** (model {_f(c.model_relevance)}, local "
            f"{_f(c.local_relevance)})" + (f"; {'; '.join(caps)}" if caps else "")
        )
    for d in r.dropped_claims:
        lines.append(f"  - claim dropped by decomposition: “{cell(d)}”")
    return lines


def cause(r: Record, threshold: float) -> str:
    """Why a case went the way it did, in a few words: the retriever, a cap that needs no reading, or a verdict."""
    if r.status == "error":
        return "error"
    if r.status == "blocked":
        return f"blocked ({r.reason})"
    if r.answered:
        return "answered"
    if r.not_in_corpus:
        return f"refused ({r.failed or 'other'}): a scripted passage id is not in this corpus"
    if any(pid not in r.retrieved for pid in r.scripted_passages):
        return f"refused ({r.failed or 'other'}): a scripted passage was not retrieved"
    if r.failed == "support" and r.claims:
        weakest = min(r.claims, key=lambda c: c.support)
        if weakest.capped_by:
            return f"refused (support): capped by `{weakest.capped_by}`"
        if weakest.local_support < threshold:
            return "refused (support): local support below the threshold"
        return "refused (support): model support below the threshold"
    if r.failed == "relevance" and r.claims:
        best = max(r.claims, key=lambda c: c.relevance)
        if best.relevance_capped_by:
            return f"refused (relevance): capped by `{best.relevance_capped_by}`"
        return "refused (relevance): the model's verdict"
    return f"refused ({r.failed or r.reason or 'other'})"


def scripts_provenance(path: Path) -> str:
    """Where the scripts came from, as git tells it: the commit that added them, and whether they changed."""
    if not path.resolve().is_relative_to(REPO_ROOT):
        return "**outside this repository**, so no commit shows when they were written"
    try:
        rel = str(path.resolve().relative_to(REPO_ROOT))
        log = subprocess.run(
            ["git", "log", "--format=%h %ad %s", "--date=short", "--", rel],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout.splitlines()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--", rel],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            check=True,
            timeout=30,
        ).stdout.strip()
    except (OSError, ValueError, subprocess.SubprocessError):
        return "(git history unavailable)"
    if not log:
        return "**not committed**" + (" (uncommitted changes)" if dirty else "")
    first = log[-1].split(" ", 2)
    words = f"committed in `{first[0]}` ({first[1]}), "
    words += "untouched since" if len(log) == 1 else f"**changed in {len(log) - 1} later commit(s)**"
    if dirty:
        words += "; **the working tree has uncommitted changes to it**"
    return words


def render(
    records: Sequence[Record],
    settings: Settings,
    corpus: Path,
    elapsed_s: float,
    limit: int | None,
    scripts: Path,
    case_files: Sequence[Path] = CASE_FILES,
) -> str:
    # Every kind, asked or not (--kinds): a kind not asked has no records.
    by_kind = {kind: [r for r in records if r.kind == kind] for kind in ALL_KINDS}
    tallies = {kind: Tally.of(rs) for kind, rs in by_kind.items()}
    cases = len({r.id for r in records})
    suites = list(dict.fromkeys(r.suite for r in records))
    absent: dict[str, list[str]] = {}  # scripted passage id the corpus lacks -> the cases that name it
    for r in records:
        for pid in r.not_in_corpus:
            if r.id not in absent.setdefault(pid, []):
                absent[pid].append(r.id)
    questions = " and ".join(f"`{shown(path)}`" for path in case_files)
    off_wrong = by_kind["off_wrong"]
    veto = [r for r in off_wrong if r.question_facts_missing]
    veto_missed = [r for r in veto if r.status != "refused" and r.status != "blocked"]
    g = settings.gate
    lines = [
        "# Hosted path, end to end, with scripted model outputs",
        "",
        f"Generated by `python -m evals.hosted` in {elapsed_s:.0f} s"
        + (f", **limited to the first {limit} scripted cases**" if limit else "")
        + f": {cases} cases × {len(KINDS)} kinds = {len(records)} asks. Profile `anthropic` through the real "
        "`anthropic` SDK against the fake Messages API of `tests/fake_anthropic.py` on loopback, over corpus "
        f"`{shown(corpus)}` ingested into a throwaway schema (the in-process pipeline of `provenance evals`: "
        f"cache off, no guards). Local verifier `{settings.local_verifier}`, {judged_by(settings)}, k = "
        f"{settings.retrieval.k}, retrieval "
        f"`{settings.retrieval.mode}`; gate: support mean ≥ {g.threshold:.2f} and weakest claim ≥ "
        f"{g.min_claim:.2f}, relevance of the most relevant claim ≥ {g.relevance:.2f} (uncertain from "
        f"{g.relevance_uncertain:.2f}).",
        "",
        f"The questions are those of {questions}. What the model says comes from `{shown(scripts)}`, "
        "written by hand for their answerable cases before anything was tuned against them, and read as "
        f"written: {scripts_provenance(scripts)}. The fake screens every question `ok`; answers with the "
        "scripted answer, citing the scripted passages that were in its prompt (else the prompt's passages "
        "from the same file, else none); and returns the scripted claims, each with supported_probability "
        f"{SUPPORTED}, those passage ids, and relevance_probability {RELEVANT} ({NOT_RELEVANT} in c1). "
        + (
            "Support and relevance are the reading judge's verdicts under the rules' vetoes; the model's own "
            "verdicts are recorded and do not count."
            if settings.judge.enabled
            else "Support is judged by the local verifier too and the lower verdict counts; relevance is the "
            "model's verdict under the local vetoes."
        ),
        "",
    ]
    if absent:
        named = {case for ids in absent.values() for case in ids}
        lines += [
            f"**{len(absent)} scripted passage id(s) are not in this corpus**, named by {len(named)} case(s) "
            "(listed at the end): ids this corpus's reader doesn't make (written for another reader's, or "
            "mistyped). Those answers cite the prompt's passages from the same file, and whether their fact's "
            "passage was retrieved is not known from this report.",
            "",
        ]
    lines += [
        "## Headline",
        "",
    ]
    headline_rows = []
    for kind in KINDS:
        t = tallies[kind]
        headline_rows.append([LABEL[kind], t.n, f"{t.answered} ({pct_of(t.answered, t.n)})", *target(kind, t)])
    lines += table(("kind", "N", "answered", "target", ""), "lrrll", headline_rows)
    lines += [
        "",
        f"c2 veto: of the {len(off_wrong)} off-question answers called relevant, **{len(veto)}** "
        f"{'has' if len(veto) == 1 else 'have'} a question that names a year, month or number that neither the "
        f"claim nor its support passages mention; caught (refused or blocked): **{len(veto) - len(veto_missed)} "
        f"of {len(veto)}**"
        + (" — all, as required." if not veto_missed else f" — **{len(veto_missed)} got through**.")
        + " (Computed here, independently of the pipeline, with `provenance.text`: the question's year "
        "mentions, `T.months` and `T.bare_numbers` against the text of the passages the model cited as "
        "support and the claim; `T.bare_numbers` reads number words too, “one” as 1.)",
        "",
        "## By kind",
        "",
        "Refusals are split by the judgment the gate found failing; “other” is a refusal before the gate "
        "(e.g. nothing retrieved, or no claim left).",
        "",
        *tally_table("kind", (tally_row(LABEL[kind], tallies[kind]) for kind in KINDS)),
    ]
    by_suite = (
        tally_row(f"{LABEL[kind]} · {suite}", Tally.of(r for r in by_kind[kind] if r.suite == suite))
        for kind in KINDS
        for suite in suites
    )
    lines += ["", "## By suite", "", *tally_table("kind · suite", by_suite)]

    def wrong_fact(r: Record) -> str:
        return (r.fabrication or ":").split(":", 1)[0]

    fab_kinds = sorted({wrong_fact(r) for r in by_kind["fabricated"]})
    by_fact = (tally_row(fk, Tally.of(r for r in by_kind["fabricated"] if wrong_fact(r) == fk)) for fk in fab_kinds)
    lines += ["", "## Fabricated, by kind of wrong fact", "", *tally_table("wrong fact", by_fact)]
    lines += [
        "",
        "## Why",
        "",
        "Each case by what decided it: a scripted passage missing from the prompt (the retriever's, k = "
        f"{settings.retrieval.k}), a cap that needs no reading (`provenance.stages.lexical`), or a verdict. For a "
        "support refusal, the weakest claim's; for a relevance refusal, the most relevant claim's.",
        "",
    ]
    causes = []
    for kind in KINDS:
        counts: dict[str, int] = {}
        for r in by_kind[kind]:
            key = cause(r, g.threshold)
            counts[key] = counts.get(key, 0) + 1
        causes += [[LABEL[kind], key, n] for key, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]
    lines += table(("kind", "outcome", "N"), "llr", causes)
    claims = [(r, c) for r in records if r.status != "error" for c in r.claims]
    elsewhere = [(r, c) for r, c in claims if r.cited and not set(c.supporting_passage_ids) & set(r.cited)]
    lines += [
        "",
        f"Of the {len(claims)} claims judged, **{len(elsewhere)}** were recorded against support passages none of "
        "which the model cited, although it cited at least one passage "
        f"({sum(r.kind == 'faithful' for r, _ in elsewhere)} of them in faithful answers): the support passage "
        "and the lexical caps are then those of the local verifier's pick.",
        "",
        "## Cases that missed their kind's target",
        "",
    ]
    failing: dict[Kind, tuple[str, list[Record]]] = {
        "faithful": ("not answered", [r for r in by_kind["faithful"] if not r.answered]),
        "fabricated": ("answered", [r for r in by_kind["fabricated"] if r.answered or r.status == "error"]),
        "off_honest": ("answered", [r for r in by_kind["off_honest"] if r.answered or r.status == "error"]),
        "off_wrong": ("answered", [r for r in off_wrong if r.answered or r.status == "error"]),
    }
    for kind in KINDS:
        what, rs = failing[kind]
        lines += [f"### {LABEL[kind]}: {len(rs)} {what}", ""]
        if kind == "off_wrong":
            lines += [
                "Answered off-question answers are reported, not a failure in themselves: the model wrongly said "
                "the sentence answers. Only those whose question names a fact the support lacks must be caught; "
                + (
                    "none of those is below."
                    if not veto_missed
                    else f"**{len(veto_missed)} of those are below** (marked by the named fact)."
                ),
                "",
            ]
        if not rs:
            lines += ["None.", ""]
            continue
        for r in rs:
            lines += describe(r)
        lines.append("")
    if veto:
        rows = []
        for r in veto:
            caps = ", ".join(sorted({c.relevance_capped_by or "–" for c in r.claims})) or "–"
            status = r.status + (f" ({r.failed})" if r.failed else "")
            rows.append([r.id, r.suite, ", ".join(r.question_facts_missing), status, caps])
        head = ("id", "suite", "names", "status", "relevance capped by")
        lines += ["## c2 cases the veto must catch", "", *table(head, "lllll", rows), ""]
    if absent:
        absent_rows = [[f"`{pid}`", ", ".join(ids)] for pid, ids in absent.items()]
        lines += ["## Scripted passages not in this corpus", "", *table(("passage id", "cases"), "ll", absent_rows), ""]
    return "\n".join(lines).rstrip() + "\n"


def headline(records: Sequence[Record]) -> str:
    parts = []
    for kind in KINDS:
        t = Tally.of(r for r in records if r.kind == kind)
        parts.append(f"{LABEL[kind].split(' ', 1)[0]} {t.answered}/{t.n} answered")
    veto = [r for r in records if r.kind == "off_wrong" and r.question_facts_missing]
    caught = sum(r.status in ("refused", "blocked") for r in veto)
    errors = sum(r.status == "error" for r in records)
    return "; ".join(parts) + f"; c2 veto caught {caught}/{len(veto)}" + (f"; {errors} error(s)" if errors else "")


def select_kinds(chosen: Sequence[str]) -> None:
    """Ask only these kinds: the report and its tallies follow KINDS."""
    global KINDS
    KINDS = tuple(k for k in KINDS if k in chosen)


def judged_by(settings: Settings) -> str:
    j = settings.judge
    if not j.enabled:
        return "no reading judge (the rules judge)"
    return f"reading judge `{j.model}` at `{j.base_url}`"


# --- a judge that lies -----------------------------------------------------------------------------


class LyingJudge:
    """An OpenAI-compatible judge on loopback, in a thread of its own, that says Yes (P 0.99) to everything:
    with it, whatever is refused was refused by the rules' vetoes and the lexical caps alone."""

    MODEL = "lying-judge"

    def __init__(self) -> None:
        import threading

        from tests.scripted_server import ScriptedServer, logprob_reply

        self.server = ScriptedServer(model=self.MODEL)
        self.server.reply = lambda request: (200, logprob_reply(self.MODEL, 0.99))
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.url = ""

    def start(self) -> LyingJudge:
        self.thread.start()
        self.url = asyncio.run_coroutine_threadsafe(self.server.start(), self.loop).result(timeout=10)
        return self

    def close(self) -> None:
        asyncio.run_coroutine_threadsafe(self.server.close(), self.loop).result(timeout=10)
        self.loop.call_soon_threadsafe(self.loop.stop)


# --- entry point ----------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    from provenance.services import build_profile, load_embedder

    parser = argparse.ArgumentParser(prog="python -m evals.hosted", description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT, help="Markdown report (default evals/hosted.md)")
    parser.add_argument("--json", type=Path, default=None, help="also write one JSON record per (case, kind) here")
    parser.add_argument("--limit", type=int, default=None, help="only the first N scripted cases")
    parser.add_argument("--ids", default=None, help="only these case ids, comma-separated")
    parser.add_argument(
        "--corpus",
        type=Path,
        default=None,
        metavar="DIR",
        help="the folder to ingest and ask (default CORPUS_DIR, i.e. corpus/)",
    )
    parser.add_argument(
        "--cases",
        type=Path,
        action="append",
        default=None,
        metavar="FILE",
        help="a cases file the scripts' questions come from; repeat for more "
        "(default evals/cases.jsonl and evals/paraphrase.jsonl)",
    )
    parser.add_argument(
        "--scripts",
        type=Path,
        default=SCRIPTS,
        metavar="FILE",
        help="the model's scripted outputs, one row per case (default evals/hosted-scripts.jsonl)",
    )
    parser.add_argument(
        "--kinds", default=None, help=f"only these kinds, comma-separated (of {', '.join(KINDS)}); default all"
    )
    parser.add_argument(
        "--lying-judge",
        action="store_true",
        help="a reading judge scripted to say Yes to everything (P(Yes) 0.99): what the vetoes alone catch",
    )
    args = parser.parse_args(argv)
    if args.kinds:
        chosen = [k.strip() for k in args.kinds.split(",") if k.strip()]
        unknown_kinds = [k for k in chosen if k not in KINDS]
        if unknown_kinds:
            parser.error(f"unknown kinds: {', '.join(unknown_kinds)}")
        select_kinds(chosen)
    case_files: list[Path] = args.cases or list(CASE_FILES)
    for what, path in [("scripts", args.scripts), *(("cases", p) for p in case_files)]:
        if not path.is_file():
            parser.error(f"--{what}: no such file: {path}")
    if args.corpus is not None and not args.corpus.is_dir():
        parser.error(f"--corpus: no such folder: {args.corpus}")

    base = cli_settings()
    if base is None:
        return 2
    try:
        rows = load_scripts(args.scripts)
        questions = load_questions(case_files)
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.ids:
        wanted = {i.strip() for i in args.ids.split(",") if i.strip()}
        rows = [r for r in rows if r.id in wanted]
    if args.limit is not None:
        rows = rows[: args.limit]
    unknown = [r.id for r in rows if r.id not in questions]
    if unknown:
        files = ", ".join(shown(p) for p in case_files)
        print(f"error: scripts for case ids that {files} lack: {', '.join(unknown)}", file=sys.stderr)
        return 2

    started = time.monotonic()
    model = ScriptedModel()
    fake = FakeAnthropic().start()
    liar = LyingJudge().start() if args.lying_judge else None
    try:
        fake.responder = model
        settings = fake.settings(base, anthropic_timeout_s=MODEL_TIMEOUT_S)
        if liar is not None:
            settings = settings.with_overrides(
                judge="openai", judge_base_url=liar.url, judge_model=LyingJudge.MODEL, judge_max_retries=0
            )
        embedder = load_embedder(settings)
        profile = build_profile(settings, embedder)
        corpus = args.corpus or settings.ingest.corpus_dir
        records = asyncio.run(run_all(settings, corpus, rows, questions, embedder, profile, model))
    finally:
        fake.close()
        if liar is not None:
            liar.close()
    elapsed = time.monotonic() - started

    args.out.parent.mkdir(parents=True, exist_ok=True)
    report = render(records, settings, corpus, elapsed, args.limit, args.scripts, case_files)
    args.out.write_text(report, encoding="utf-8")
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_bytes(b"".join(msgspec.json.encode(r) + b"\n" for r in records))
    print(headline(records))
    print(f"report: {shown(args.out)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
