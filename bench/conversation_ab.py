"""A first turn's cost with conversations on against off, in process (issue 44's target: what a question costs
today, within noise, cached and uncached). One service over an embedded Postgres with corpus/ ingested and
the guards on (the cache is the guards'); two pipelines over the same store, embedder, profile and guards, one
with conversations and one without, asked in alternating blocks so that other work on the machine falls on
both alike. Reports each side's p50 and p99 per path, and the condense stage's p50 over follow-ups.

    .venv/bin/python -m bench.conversation_ab [--cached 2000] [--uncached 30] [--blocks 10]
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from bench.common import percentile
from bench.server import load_questions
from provenance.inference.embedder import Embedder
from provenance.ingest.folder import ingest
from provenance.pipeline.door import Pipeline
from provenance.services import build_services, load_embedder
from provenance.settings import REPO_ROOT, Settings

FOLLOW_UPS = ("Is it cheaper for students?", "And on weekends?", "Can I bring a guest to it?", "What about lockers?")


async def _timed(pipeline: Pipeline, question: str, n: int, use_cache: bool, tag: str) -> list[float]:
    out = []
    for i in range(n):
        started = time.perf_counter()
        await pipeline.ask(question, request_id=f"{tag}-{i}", use_cache=use_cache)
        out.append((time.perf_counter() - started) * 1000)
    return out


async def main(cached: int, uncached: int, blocks: int, flush_ms: float) -> None:
    data_dir = Path(tempfile.mkdtemp(prefix="conversation-ab-"))
    settings = Settings().with_overrides(
        data_dir=data_dir,
        log_level="warning",
        rate_limit_per_hour=0,
        conversation_flush_ms=flush_ms,
        # Both pipelines without the metrics observer: the service's has one, a pipeline built here would not.
        metrics_enabled=False,
    )
    embedder: Embedder = load_embedder(settings)
    services = await build_services(settings)
    try:
        await ingest(services.store, REPO_ROOT / "corpus", lambda: embedder, settings.embedding.model)
        on = services.pipeline
        await on.corpora.refresh()
        off = Pipeline(settings, on.store, on.embedder, on.profile, on.guards, corpora=on.corpora)
        questions = load_questions(("answerable",))
        question = questions[0]
        for p in (on, off):
            await p.ask(question, request_id="warm")  # fills the cache
        times: dict[str, dict[str, list[float]]] = {
            "on": {"cached": [], "uncached": []},
            "off": {"cached": [], "uncached": []},
        }
        for b in range(blocks):
            order = [("on", on), ("off", off)] if b % 2 == 0 else [("off", off), ("on", on)]
            for name, p in order:
                times[name]["cached"] += await _timed(p, question, cached // blocks, True, f"c{b}{name}")
                q = questions[b % len(questions)]
                times[name]["uncached"] += await _timed(p, q, max(1, uncached // blocks), False, f"u{b}{name}")
        condense: list[float] = []
        for first in questions[:10]:
            answered = await on.ask(first, request_id="first", use_cache=False)
            for follow in FOLLOW_UPS:
                r = await on.ask(
                    follow, request_id="follow", use_cache=False, conversation_id=answered.response.conversation_id
                )
                condense.append(r.response.stages.condense.ms)
        print("| path | conversations | n | p50 ms | p99 ms |")
        print("|---|---|---:|---:|---:|")
        for path in ("cached", "uncached"):
            for name in ("off", "on"):
                t = sorted(times[name][path])
                print(
                    f"| {path} first turn | {name} | {len(t)} | {percentile(t, 0.5):.2f} | {percentile(t, 0.99):.2f} |"
                )
        c = sorted(condense)
        print(
            f"\ncondense stage (local), {len(c)} follow-ups:"
            f" p50 {percentile(c, 0.5):.3f} ms, p99 {percentile(c, 0.99):.3f} ms"
        )
    finally:
        await services.close()


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cached", type=int, default=2000)
    parser.add_argument("--uncached", type=int, default=30)
    parser.add_argument("--blocks", type=int, default=10)
    parser.add_argument("--flush-ms", type=float, default=200.0, help="CONVERSATION_FLUSH_MS")
    args = parser.parse_args()
    asyncio.run(main(args.cached, args.uncached, args.blocks, args.flush_ms))
