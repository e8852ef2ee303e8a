"""Readers' verdicts turned into eval cases (`provenance feedback export`) and counted
(`provenance feedback stats`).

A case from feedback is a draft for a person: it carries `needsReview: true`, the request id and the readers'
notes, and its reference strings are left empty. "It should have answered" becomes an answerable case. "The
answer is wrong" does not become a must-refuse case (the question may well be answerable, and that would
reward refusing): its answer becomes one that must not be given again (`mustNotInclude`), and `expect` is left
for the reviewer. Each case says how the response was served and what has changed since (`served.since`).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

import msgspec

from provenance.evaluation.cases import Case, Expect, Served
from provenance.feedback.responses import served_settings
from provenance.feedback.schema import KINDS
from provenance.settings import Settings
from provenance.store import Store
from provenance.store.feedback import FeedbackCount, FeedbackRow

BUCKET = "feedback"
# Not variables a deployment sets: compared only when both sides have one.
_NOT_COMPARED = frozenset({"cacheTag"})


class Exported(msgspec.Struct, frozen=True):
    cases: list[Case]
    verdicts: int
    right: int


def changes_since(row: FeedbackRow, settings: Settings, versions: dict[str, str]) -> list[str]:
    """What differs between how the rated response was served and how this deployment would serve it now."""
    changes: list[str] = []
    now = served_settings(settings, settings.profile)
    for name, then in row.settings.items():
        if name in _NOT_COMPARED or name not in now or now[name] == then:
            continue
        changes.append(f"{name} was {then!r}, is {now[name]!r} now")
    if row.corpus is not None:
        if row.corpus not in versions:
            changes.append(f"the corpus {row.corpus!r} has been removed since")
        elif versions[row.corpus] != row.corpus_version:
            changes.append(
                f"the corpus {row.corpus!r} has been ingested again since (version {row.corpus_version} then, "
                f"{versions[row.corpus]} now)"
            )
    return changes


def _kind(rows: Sequence[FeedbackRow]) -> str:
    """The kind most readers gave; on a tie, the one that says most (a wrong answer, then a wrong refusal)."""
    counts = Counter(r.kind or "other" for r in rows)
    return max(KINDS, key=lambda k: (counts[k], -KINDS.index(k)))


def case_from(rows: Sequence[FeedbackRow], settings: Settings, versions: dict[str, str]) -> Case:
    """One case from the "wrong" verdicts of one response (several readers may have rated it)."""
    first = rows[0]
    kind = _kind(rows)
    answer = first.response.get("answer") if first.status == "answered" else None
    expect: Expect | None = "answer" if kind == "should_have_answered" else None
    notes = [r.note for r in rows if r.note]
    return Case(
        id=f"fb-{first.request_id}",
        bucket=BUCKET,
        question=first.question,
        expect=expect,
        mustIncludeAny=[],
        note=" | ".join(notes) if notes else None,
        mustNotInclude=[answer] if kind == "wrong_answer" and answer else None,
        requestId=first.request_id,
        needsReview=True,
        served=Served(
            status=first.status,
            reason=first.reason,
            cached=first.cached,
            corpus=first.corpus,
            corpus_version=first.corpus_version,
            served_at=first.served_at.isoformat(),
            verdict="wrong",
            kind=kind,
            settings=first.settings,
            since=changes_since(first, settings, versions),
        ),
    )


def cases_from(rows: Iterable[FeedbackRow], settings: Settings, versions: dict[str, str]) -> Exported:
    by_request: dict[str, list[FeedbackRow]] = {}
    verdicts = right = 0
    for row in rows:
        verdicts += 1
        if row.verdict == "right":
            right += 1
            continue
        by_request.setdefault(row.request_id, []).append(row)
    cases = [case_from(group, settings, versions) for group in by_request.values()]
    return Exported(cases=cases, verdicts=verdicts, right=right)


async def export(store: Store, settings: Settings, out: Path, since: dt.datetime | None, corpus: str | None) -> str:
    """Write the cases to `out` (JSON Lines, as `provenance evals --cases` reads them); the summary line."""
    exported = cases_from(await store.feedback(since, corpus), settings, await store.corpus_versions())
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(b"".join(msgspec.json.encode(case) + b"\n" for case in exported.cases))
    undecided = sum(c.expect is None for c in exported.cases)
    return (
        f"wrote {len(exported.cases)} case(s) to {out} from {exported.verdicts} verdict(s) "
        f"({exported.right} 'right', not exported); each needs review: fill mustIncludeAny"
        + (f", and set expect in the {undecided} where it is null" if undecided else "")
    )


def stats_table(counts: Sequence[FeedbackCount]) -> str:
    """Verdicts by corpus and week (the Monday it starts, UTC): right, wrong, and wrong by kind; then each
    corpus's total."""
    columns = ("right", "wrong", *KINDS)
    header = ("corpus", "week", "verdicts", *columns)
    cells: dict[tuple[str, str], Counter[str]] = {}
    for c in counts:
        corpus = c.corpus or "-"
        for week in (c.week.isoformat(), "all"):
            tally = cells.setdefault((corpus, week), Counter())
            tally["verdicts"] += c.n
            tally[c.verdict] += c.n
            if c.verdict == "wrong":
                tally[c.kind or "other"] += c.n
    lines = [header]
    for (corpus, week), tally in sorted(cells.items(), key=lambda kv: (kv[0][0], kv[0][1] == "all", kv[0][1])):
        lines.append((corpus, week, *(str(tally[name]) for name in ("verdicts", *columns))))
    if len(lines) == 1:
        return "no feedback yet"
    widths = [max(len(row[i]) for row in lines) for i in range(len(header))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in lines)


async def stats(store: Store, since: dt.datetime | None, corpus: str | None) -> str:
    return stats_table(await store.feedback_counts(since, corpus))


def parse_since(text: str) -> dt.datetime:
    """A date (`2026-11-30`, midnight UTC) or a date and time; a time without a zone is UTC."""
    try:
        when = dt.datetime.fromisoformat(text)
    except ValueError:
        raise ValueError(f"--since must be a date such as 2026-11-30, got {text!r}") from None
    return when if when.tzinfo is not None else when.replace(tzinfo=dt.UTC)
