"""`provenance evals`: run eval cases, or a conversation suite, through the pipeline and write a scorecard."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

import msgspec

from provenance.cli import common
from provenance.cli.common import Mistake
from provenance.wire import DEFAULT_CORPUS


class _EvalsRun:
    """What `provenance evals` runs on, every part checked before any work."""

    def __init__(self, args: argparse.Namespace) -> None:
        from provenance.evaluation.cases import load_cases
        from provenance.evaluation.runner import K_SWEEP

        self.settings = common.settings()
        if args.profile:
            self.settings = self.settings.with_overrides(profile=args.profile)
        if self.settings.profile == "anthropic" and not self.settings.anthropic.api_key:
            raise Mistake("--profile anthropic needs ANTHROPIC_API_KEY")
        if self.settings.profile == "openai" and not self.settings.openai.model:
            raise Mistake("--profile openai needs OPENAI_MODEL (and OPENAI_BASE_URL for your server)")
        self.corpus, self.name = self._corpus(args)
        own_cases = self.corpus / "cases.jsonl"
        default_cases = own_cases if own_cases.exists() else self.corpus.parent / "evals" / "cases.jsonl"
        self.cases = Path(args.cases) if args.cases else default_cases
        if not self.cases.is_file():
            raise Mistake(f"no cases file at {self.cases} (a corpus's own go in its folder, as cases.jsonl)")
        try:
            load_cases(self.cases)  # read again by the run; a case left for review stops it here
        except (ValueError, UnicodeDecodeError, msgspec.DecodeError) as exc:
            raise Mistake(str(exc).splitlines()[0]) from None
        try:
            self.k_sweep = tuple(int(k) for k in args.k_sweep.split(",")) if args.k_sweep else K_SWEEP
        except ValueError:
            raise Mistake(f"--k-sweep takes comma-separated whole numbers, got {args.k_sweep!r}") from None
        default_out = "results.md" if self.name == DEFAULT_CORPUS else f"results-{self.name}.md"
        self.out = Path(args.out) if args.out else Path("evals") / default_out
        shown_name = self.name if self.name != DEFAULT_CORPUS else self.corpus.resolve().name
        self.title = args.title or f"Evals: {shown_name}"

    def _corpus(self, args: argparse.Namespace) -> tuple[Path, str]:
        from provenance.wire import valid_name

        corpus = Path(args.corpus) if args.corpus else self.settings.ingest.corpus_dir
        if args.corpus and not corpus.is_dir() and valid_name(args.corpus):
            # A stored corpus: its evals run over the folder it was ingested from, with that folder's cases.
            folder = asyncio.run(common.corpus_folder(self.settings, args.corpus))
            if folder is None:
                raise Mistake(f"{args.corpus!r} is neither a folder nor a corpus ingested from one")
            return folder, args.corpus
        if not corpus.is_dir():
            raise Mistake(f"corpus folder not found: {corpus}")
        return corpus, DEFAULT_CORPUS  # a folder given as such keeps today's report names


def _conversation_evals(args: argparse.Namespace) -> int:
    """`provenance evals --conversations FILE`: the conversation suite (provenance.evaluation.conversations)."""
    from provenance.evaluation.conversations import run_suite
    from provenance.services import build_profile, load_embedder

    settings = common.settings()
    if args.profile:
        settings = settings.with_overrides(profile=args.profile)
    if settings.profile == "anthropic" and not settings.anthropic.api_key:
        raise Mistake("--profile anthropic needs ANTHROPIC_API_KEY")
    if settings.profile == "openai" and not settings.openai.model:
        raise Mistake("--profile openai needs OPENAI_MODEL (and OPENAI_BASE_URL for your server)")
    suite = Path(args.conversations)
    if not suite.is_file():
        raise Mistake(f"no conversation suite at {suite}")
    embedder = load_embedder(settings)
    out = Path(args.out) if args.out else Path("evals") / f"results-conversations-{settings.profile}.md"
    followed, alone = asyncio.run(run_suite(settings, suite, out, embedder, build_profile(settings, embedder)))
    print(
        f"follow-ups answered correctly {followed.answered_correctly}, standalone {alone.answered_correctly};"
        f" fabrication {followed.fabrication} vs {alone.fabrication}; recall {followed.recall} vs {alone.recall}"
        f" -> {out}"
    )
    return 0


def cmd_evals(args: argparse.Namespace) -> int:
    from provenance.evaluation.runner import run_evals
    from provenance.services import build_profile, load_embedder

    if args.conversations:
        return _conversation_evals(args)
    run = _EvalsRun(args)
    embedder = load_embedder(run.settings)
    profile = build_profile(run.settings, embedder)
    json_out = Path(args.json) if args.json else None
    _, score = asyncio.run(
        run_evals(
            run.settings,
            run.corpus,
            run.cases,
            run.out,
            json_out,
            embedder,
            profile,
            run.title,
            k_sweep=run.k_sweep,
            resume=args.resume,
        )
    )
    fab = "n/a" if score.fabrication_rate is None else f"{100 * score.fabrication_rate:.1f}%"
    fr = "n/a" if score.false_refusal_rate is None else f"{100 * score.false_refusal_rate:.1f}%"
    ac = "n/a" if score.answered_correctly is None else f"{100 * score.answered_correctly:.1f}%"
    rec = "n/a" if score.recall is None else f"{100 * score.recall:.1f}%"
    print(
        f"{score.n} cases: fabrication {fab}, false refusal {fr}, accuracy {100 * score.accuracy:.1f}%, "
        f"answered correctly {ac}, recall@k {rec}"
    )
    print(f"report: {run.out}")
    return 0


def add(sub: common.Subparsers) -> None:
    evals = sub.add_parser("evals", help="run eval cases through the pipeline and write a scorecard")
    evals.add_argument(
        "--corpus",
        default=None,
        help="a folder, or the name of an ingested corpus (its folder); ingested into an isolated schema "
        "(default: corpus/)",
    )
    evals.add_argument(
        "--cases", default=None, help="cases JSONL (default: the corpus folder's cases.jsonl, else evals/cases.jsonl)"
    )
    evals.add_argument("--profile", choices=["local", "anthropic", "openai"], default=None)
    evals.add_argument(
        "--out", default=None, help="Markdown report (default: evals/results.md, results-NAME.md for a named corpus)"
    )
    evals.add_argument(
        "--json", default=None, help="also write one JSON record per case here, each as soon as the case is done"
    )
    evals.add_argument(
        "--resume",
        action="store_true",
        help="keep the cases already recorded in --json's file and ask only the rest (a stopped run carries on)",
    )
    evals.add_argument("--title", default=None, help="report title")
    evals.add_argument(
        "--conversations",
        default=None,
        help="a conversation suite (evals/conversations.jsonl): follow-ups beside their standalone questions",
    )
    evals.add_argument("--k-sweep", default=None, help="comma-separated k values to sweep (default 2,4,6,8)")
    evals.set_defaults(func=cmd_evals)
