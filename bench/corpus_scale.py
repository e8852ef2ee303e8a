"""Real corpora at their real size (issue 34): ingest, start-up, idle memory and /ask right after start-up.

- The 18F handbook (`../shared/corpora/18f-handbook/pages`), really ingested beside corpus/ by the
  `provenance ingest` command under `/usr/bin/time -v`: wall time, passages/s beside the embedder's own
  speed on the same passages, sentences/s, peak RSS; corpus/ the same way for the comparison.
- 2k, 20k and 100k passages: corpus/ plus synthetic passages (clustered vectors as bench/vector_scale.py
  makes them, each with one stored sentence vector, text drawn from corpus/'s words so full-text search has
  work), written through ingest's own staging area and switch in a subprocess: wall time, passages/s, RSS.
- For each database, a `provenance serve` started on it: time to the first 200 from /healthz and the CPU
  that took, the CPU in the 60 s after (Postgres excluded), the idle RSS, uncached /ask (c=1) p50/p99 and
  the first 20 against those after 100, and cached /ask at c=8 (bench/loadgen.py).

Rewrites the section between the CORPUS_SCALE markers in docs/benchmarks.md (unless --no-write).

    .venv/bin/python -m bench.corpus_scale [--sizes 2000,20000,100000] [--no-write]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import numpy as np

from bench import loadgen
from bench.common import machine, percentile, write_section
from bench.server import REPO_ROOT, Server, cpu_s, load_questions, rss_mib
from bench.vector_scale import DIM, clustered
from provenance.report import row, table

HANDBOOK = REPO_ROOT.parent / "shared" / "corpora" / "18f-handbook" / "pages"
DOC = REPO_ROOT / "docs" / "benchmarks.md"
BEGIN, END = "<!-- CORPUS_SCALE -->", "<!-- /CORPUS_SCALE -->"
IDLE_WINDOW_S = 60
UNCACHED_REQUESTS = 130  # the first 20, and those after 100
CACHED_REQUESTS = 2000


def log(message: str) -> None:
    print(f"[corpus_scale {time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def load_average() -> str:
    return " / ".join(f"{x:.2f}" for x in os.getloadavg())


# --- ingest -----------------------------------------------------------------------------------------


def timed(cmd: list[str], env: dict[str, str]) -> tuple[float, int, str]:
    """(wall s, peak RSS bytes, stdout) of a command under GNU time; its CPU seconds are in `last_cpu_s`."""
    started = time.perf_counter()
    done = subprocess.run(["/usr/bin/time", "-v", *cmd], env=env, capture_output=True, text=True, check=False)
    wall = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"{cmd} failed:\n{done.stderr[-3000:]}")
    peak = re.search(r"Maximum resident set size \(kbytes\): (\d+)", done.stderr)
    cpu = [float(x) for x in re.findall(r"(?:User|System) time \(seconds\): ([\d.]+)", done.stderr)]
    last_cpu_s[0] = sum(cpu)
    return wall, int(peak.group(1)) * 1024 if peak else 0, done.stdout


last_cpu_s = [0.0]


def real_ingest(env: dict[str, str], folder: Path, corpus: str) -> dict[str, Any]:
    cmd = [sys.executable, "-m", "provenance", "ingest", str(folder), "--corpus", corpus]
    wall, peak, out = timed(cmd, env)
    found = re.search(r"(\d+) passages, (\d+) embedded \((\d+) sentences\)", out)
    if not found:
        raise RuntimeError(f"unexpected ingest output: {out}")
    passages, embedded, sentences = (int(g) for g in found.groups())
    return {
        "corpus": corpus,
        "passages": passages,
        "embedded": embedded,
        "sentences": sentences,
        "wall_s": wall,
        "cpu_s": last_cpu_s[0],
        "peak_rss": peak,
    }


def embedder_speed(folder: Path, n: int = 192) -> float:
    """Passages/s of the embedder alone on the corpus's own first `n` passages (heading and text, as ingest
    embeds them, batched as ingest batches them): what ingest's speed is a ratio of."""
    from provenance.ingest.chunking import chunk_blocks
    from provenance.ingest.folder import _embed_sorted, passage_text, read_sources
    from provenance.services import load_embedder
    from provenance.settings import load_settings

    embedder = load_embedder(load_settings())
    files, _ = read_sources(folder)
    texts: list[str] = []
    for f in files:
        texts += [passage_text(c) for c in chunk_blocks(f.name, f.blocks, embedder.count_tokens, 256)]
        if len(texts) >= n:
            break
    texts = texts[:n]
    _embed_sorted(embedder, texts[:32], 32)  # the session's first call
    started = time.perf_counter()
    _embed_sorted(embedder, texts, 32)
    return len(texts) / (time.perf_counter() - started)


# --- synthetic passages through the staging area (a subprocess of its own, for its RSS) ----------------


async def _synthetic(size: int) -> dict[str, Any]:
    from provenance.claims.vectors import vocabulary_words
    from provenance.ingest.chunking import Chunk
    from provenance.ingest.folder import EMBED_WINDOW, corpus_version
    from provenance.settings import load_settings
    from provenance.store.corpora import CorpusStore, Staged
    from provenance.store.pool import create_pool, migrate, resolve_database_url
    from provenance.text import SEGMENTER_VERSION

    settings = load_settings()
    model = settings.embedding.model
    pool = await create_pool(resolve_database_url(settings), settings)
    await migrate(pool)
    store = CorpusStore(pool)
    state = await store.corpus_state("default")
    assert state is not None, "ingest corpus/ first"
    async with pool.acquire() as conn:
        real = await conn.fetch(
            "SELECT id, source, heading, position, text, token_count FROM passages WHERE corpus = 'default'"
            " AND source NOT LIKE 'synthetic/%'"
        )
    words = sorted(set().union(*(vocabulary_words(r["text"]) for r in real)))
    rng = np.random.default_rng(size)
    centres = rng.standard_normal((500, DIM)).astype(np.float32)
    centres /= np.linalg.norm(centres, axis=1, keepdims=True)
    started = time.perf_counter()
    hashes: dict[str, str] = {}
    window: list[Staged] = []
    for r in real:  # the real passages stand as they are (their stored vectors)
        chunk = Chunk(r["id"], r["source"], r["heading"], r["position"], r["text"], r["token_count"])
        hashes[chunk.id] = chunk.content_hash
        window.append(Staged(chunk, None, None))
    await store.stage("default", model, SEGMENTER_VERSION, window)
    for start in range(0, size - len(real), EMBED_WINDOW):
        n = min(EMBED_WINDOW, size - len(real) - start)
        vectors = clustered(2 * n, rng, centres)
        window = []
        for i in range(n):
            k = start + i
            text = " ".join(rng.choice(words, 30)).capitalize() + "."
            chunk = Chunk(f"synthetic/{k // 100}.md#p{k}", f"synthetic/{k // 100}.md", f"Synthetic {k}", k, text, 40)
            hashes[chunk.id] = chunk.content_hash
            window.append(Staged(chunk, vectors[2 * i], [(0, len(text), vectors[2 * i + 1])]))
        await store.stage("default", model, SEGMENTER_VERSION, window)
    staged_s = time.perf_counter() - started
    from provenance.store.corpora import CorpusDescription

    await store.switch_corpus(
        list(hashes),
        model,
        SEGMENTER_VERSION,
        corpus_version(hashes, model),
        "synthetic",
        state.files,
        CorpusDescription("default", state.source_dir, state.title, state.description, state.examples),
    )
    switched_s = time.perf_counter() - started
    hnsw = await store.ensure_hnsw_index() if size >= settings.retrieval.hnsw_min_passages else False
    async with pool.acquire() as conn:
        await conn.execute("ANALYZE passages", timeout=3600)
        await conn.execute("ANALYZE passage_sentences", timeout=3600)
    total_s = time.perf_counter() - started
    await pool.close()
    return {"size": size, "staged_s": staged_s, "switch_s": switched_s - staged_s, "wall_s": total_s, "hnsw": hnsw}


def synthetic_ingest(env: dict[str, str], size: int) -> dict[str, Any]:
    wall, peak, out = timed([sys.executable, "-m", "bench.corpus_scale", "--synthetic", str(size)], env)
    result: dict[str, Any] = json.loads(out.strip().splitlines()[-1])
    result.update(peak_rss=peak, process_wall_s=wall)
    return result


# --- a server started on the database ------------------------------------------------------------------


def handbook_questions(limit: int = 200) -> list[str]:
    """One question per 18F file about its first section, as `describe` derives example questions: written
    from the headings, never tuned to an answer."""
    questions = []
    for path in sorted(HANDBOOK.rglob("*.md")):
        for line in path.read_text(errors="replace").splitlines():
            if line.startswith("## "):
                questions.append(f"What does the handbook say about {line[3:].strip()}?")
                break
    return list(dict.fromkeys(questions))[:limit]


def ask_body(question: str, corpus: str | None) -> dict[str, str]:
    return {"question": question, **({"corpus": corpus} if corpus else {})}


def uncached(url: str, questions: list[str], corpus: str | None) -> dict[str, Any]:
    """Distinct questions at c=1, each asked for the first time (so none is cached)."""
    latencies: list[float] = []
    statuses: dict[str, int] = {}
    # Each stage's own ms as the response records it, so that two databases' p50s can be compared stage by
    # stage instead of guessed at from the totals.
    stage_ms: dict[str, list[float]] = {}
    with httpx.Client(base_url=url, timeout=120) as client:
        for q in questions:
            started = time.perf_counter()
            r = client.post("/ask", json=ask_body(q, corpus))
            latencies.append((time.perf_counter() - started) * 1000)
            body = r.json() if r.status_code == 200 else {}
            status = body.get("status", str(r.status_code))
            statuses[status] = statuses.get(status, 0) + 1
            for name, stage in body.get("stages", {}).items():
                if stage.get("status") != "skipped":
                    stage_ms.setdefault(name, []).append(stage.get("ms", 0.0))
            if "totalMs" in body:
                stage_ms.setdefault("totalMs", []).append(body["totalMs"])
    return {
        "n": len(latencies),
        "p50": percentile(latencies, 0.5),
        "p99": percentile(latencies, 0.99),
        "first20_p50": percentile(latencies[:20], 0.5),
        "after100_p50": percentile(latencies[100:], 0.5) if len(latencies) > 100 else None,
        "statuses": statuses,
        "stage_p50": {name: percentile(ms, 0.5) for name, ms in stage_ms.items()},
        "stage_mean": {name: sum(ms) / len(ms) for name, ms in stage_ms.items()},
    }


def cached(server: Server, question: str) -> dict[str, Any]:
    httpx.post(f"{server.url}/ask", json={"question": question}, timeout=120)  # fills the cache
    hits = loadgen.load("127.0.0.1", server.port, [question], 8, CACHED_REQUESTS, marker=b'"cached":true')
    return {"rps": hits.throughput, "p50": hits.rt(0.5), "p99": hits.rt(0.99), "cached": hits.marked, "ok": hits.ok}


def checkpoint(report: dict[str, Any]) -> None:
    (Path(tempfile.gettempdir()) / "corpus_scale.json").write_text(json.dumps(report, indent=1))


def serve(data_dir: Path, name: str, questions: list[str], corpus: str | None) -> dict[str, Any]:
    log(f"{name}: serve, {IDLE_WINDOW_S} s idle after /healthz, then /ask")
    started = time.monotonic()
    server = Server(data_dir, ingest=False)
    try:
        ready = None
        while ready is None:
            if server.proc.poll() is not None or time.monotonic() - started > 600:
                raise RuntimeError(f"server did not start:\n{server.log_tail()}")
            try:
                if httpx.get(f"{server.url}/healthz", timeout=2).status_code == 200:
                    ready = time.monotonic()
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.1)
        cpu_at_ready = cpu_s(server.processes())
        time.sleep(IDLE_WINDOW_S)
        cpu_idle = cpu_s(server.processes()) - cpu_at_ready
        idle_rss = rss_mib(server.processes())
        slow = uncached(server.url, questions, corpus)
        fast = cached(server, load_questions()[0])
        return {
            "name": name,
            "startup_s": ready - started,
            "startup_cpu_s": cpu_at_ready,
            "idle_cpu_s": cpu_idle,
            "idle_rss_mib": idle_rss,
            "uncached": slow,
            "cached": fast,
        }
    finally:
        server.stop()


# --- the report ----------------------------------------------------------------------------------------


def mib(n: int) -> str:
    return f"{n / 2**20:,.0f} MiB"


def _ingest_targets(ing: dict[str, dict[str, Any]]) -> str:
    hf, base = ing.get("18f"), ing.get("default")
    if hf is None or base is None:
        return "Targets: not measured in this run."
    return (
        f"Targets: 18F peak RSS ≤ 1.5 GB: **{mib(hf['peak_rss'])}**; less than 200 MB above corpus/'s "
        f"({mib(base['peak_rss'])}): **{(hf['peak_rss'] - base['peak_rss']) / 2**20:+.0f} MiB**; at least 6 "
        f"passages/s with the sentence vectors: **{hf['passages'] / hf['wall_s']:.1f}**."
    )


def _shared(r: dict[str, Any]) -> str:
    """Says so when other work shared the cores: a 1-minute load average past the bench's own one process."""
    busiest = max(float(r[k].split(" / ")[0]) for k in ("load_before", "load_after"))
    return ", on cores shared with other work" if busiest > 1.5 else ", on an otherwise idle machine"


def _stage_table(servers: list[dict[str, Any]]) -> list[str]:
    """The uncached runs' time stage by stage, as each response recorded it: where a larger database's extra
    milliseconds go. Means as well as p50s, since a stage most questions skip has a p50 over few of them."""
    timed = [s for s in servers if s["uncached"].get("stage_mean")]
    if not timed:
        return []
    names = [n for n in timed[0]["uncached"]["stage_mean"] if n != "totalMs"]
    for s in timed[1:]:
        names += [n for n in s["uncached"]["stage_mean"] if n not in names and n != "totalMs"]
    lines = [
        "",
        "Where the uncached time goes: each stage's mean / p50 ms over the questions that ran it, as the "
        "responses record it (`totalMs`: the pipeline's own total, without HTTP):",
        "",
    ]
    rows = []
    for name in [*names, "totalMs"]:
        cells = [f"`{name}`"]
        for s in timed:
            mean, p50 = s["uncached"]["stage_mean"].get(name), s["uncached"]["stage_p50"].get(name)
            cells.append("-" if mean is None else f"{mean:.1f} / {p50:.1f}")
        rows.append(cells)
    lines += table(("stage", *(s["name"] for s in timed)), "l" + "r" * len(timed), rows)
    return lines


def render(r: dict[str, Any]) -> str:
    ing = {i["corpus"]: i for i in r["ingests"]}
    lines = [
        BEGIN,
        "## Real corpora at scale: ingest, start-up, /ask after start-up",
        "",
        f"`bench/corpus_scale.py` ({r['machine']}; load average {r['load_before']} before, {r['load_after']} "
        f"after{_shared(r)}; {r['wall_s'] / 60:.0f} min). Sentence and word "
        "vectors are computed at ingest and stored (passage_sentences, word_vectors); start-up reads them, "
        "computes nothing from the corpus.",
        "",
        "### Ingest",
        "",
        "`provenance ingest DIR --corpus NAME` under `/usr/bin/time -v`, each into the same database: wall "
        "time, passages/s (and the embedder's own passages/s on that corpus's passages, batched as ingest does: the "
        "ratio says what chunking, sentences, words and the store add), sentences/s, peak RSS.",
        "",
        *table(
            (
                "corpus",
                "passages",
                "sentences",
                "wall s",
                "CPU s",
                "passages/s",
                "embedder alone passages/s",
                "ratio",
                "sentences/s",
                "peak RSS",
            ),
            "lrrrrrrrrr",
        ),
    ]
    for name, label in (("default", "corpus/"), ("18f", "18F handbook (246 files)")):
        if name not in ing:
            lines.append(f"| {label} | (not measured in this run) |||||||||")
            continue
        i = ing[name]
        pps = i["passages"] / i["wall_s"]
        lines.append(
            row(
                [
                    label,
                    f"{i['passages']:,}",
                    f"{i['sentences']:,}",
                    f"{i['wall_s']:.0f}",
                    f"{i.get('cpu_s', 0):.0f}",
                    f"{pps:.1f}",
                    f"{i['embedder_pps']:.1f}",
                    f"{pps / i['embedder_pps']:.2f}",
                    f"{i['sentences'] / i['wall_s']:.0f}",
                    mib(i["peak_rss"]),
                ]
            )
        )
    lines += ["", _ingest_targets(ing), ""]
    lines += [
        "Before this change (issue 34's figures): 4.9 GB, 6 min 06 s for 2,273 passages.",
        *(["", r["ingest_note"]] if r.get("ingest_note") else []),
        "",
        "Synthetic passages (made-up vectors, one sentence each) written through ingest's staging area and "
        "switched in one transaction, in a subprocess under `/usr/bin/time -v`, beside corpus/'s real ones:",
        "",
        *table(
            ("passages", "staged s", "switch s", "whole s (HNSW build included)", "passages/s", "peak RSS"),
            "rrrrrr",
            (
                [
                    f"{s['size']:,}",
                    f"{s['staged_s']:.1f}",
                    f"{s['switch_s']:.1f}",
                    f"{s['wall_s']:.1f}",
                    f"{s['size'] / s['wall_s']:,.0f}",
                    mib(s["peak_rss"]),
                ]
                for s in r.get("synthetic", [])
            ),
        ),
    ]
    lines += [
        "",
        "### Start-up, idle, and /ask right after start-up",
        "",
        f"A `provenance serve` (one worker, local profile) started on each database: seconds to the first 200 "
        f"from /healthz and the CPU used until then; the CPU in the {IDLE_WINDOW_S} s after it and the RSS at "
        "the end of them (the server's process tree; Postgres excluded); then uncached /ask at c=1 (distinct "
        "questions, each asked once: the 18F corpus is asked one question per file about its first section, the "
        "others the eval questions), and cached /ask at c=8 (bench/loadgen.py, 2,000 requests).",
        "",
    ]
    servers = []
    for s in r["servers"]:
        u, c = s["uncached"], s["cached"]
        after = f"{u['after100_p50']:.0f}" if u["after100_p50"] is not None else "-"
        servers.append(
            [
                s["name"],
                f"{s['startup_s']:.1f}",
                f"{s['startup_cpu_s']:.1f}",
                f"{s['idle_cpu_s']:.2f}",
                f"{s['idle_rss_mib']:.0f} MiB",
                f"{u['p50']:.0f} / {u['p99']:.0f}",
                f"{u['first20_p50']:.0f} / {after}",
                f"{c['rps']:,.0f}",
                f"{c['p50']:.1f} / {c['p99']:.1f}",
            ]
        )
    head = (
        "database",
        "start-up s",
        "start-up CPU s",
        "CPU s in the 60 s after",
        "idle RSS",
        "uncached p50 / p99 ms",
        "first 20 p50 / after 100 p50 ms",
        "cached c=8 req/s",
        "cached p50 / p99 ms",
    )
    lines += table(head, "lrrrrrrrr", servers)
    lines += ["", "Answers in the uncached runs (status: count):", ""]
    for s in r["servers"]:
        lines.append(f"- {s['name']}: {json.dumps(s['uncached']['statuses'])}")
    lines += _stage_table(r["servers"])
    lines += ["", END]
    return "\n".join(lines)


def write_doc(section: str) -> None:
    write_section(DOC, BEGIN, END, section)


def ingest_only(write: bool) -> int:
    from provenance.store.embedded_pg import start_embedded, stop_embedded

    report = json.loads((Path(tempfile.gettempdir()) / "corpus_scale.json").read_text())
    load_before = load_average()
    data_dir = Path(tempfile.mkdtemp(prefix="provenance-corpus-scale-"))
    try:
        env = {k: v for k, v in os.environ.items() if k not in ("DB_SCHEMA", "PROFILE", "ANTHROPIC_API_KEY")}
        env.update(DATA_DIR=str(data_dir), LOG_LEVEL="warning")
        env["DATABASE_URL"] = start_embedded(data_dir / "pg")
        os.environ.update(DATA_DIR=env["DATA_DIR"], DATABASE_URL=env["DATABASE_URL"])
        ingests = []
        for folder, corpus in ((REPO_ROOT / "corpus", "default"), (HANDBOOK, "18f")):
            log(f"ingest {folder}")
            ingests.append(real_ingest(env, folder, corpus))
            ingests[-1]["embedder_pps"] = embedder_speed(folder)
    finally:
        stop_embedded(data_dir / "pg")
        shutil.rmtree(data_dir, ignore_errors=True)
    report["ingests"] = ingests
    report["ingest_note"] = (
        f"The two ingest rows come from a later run of only them (`--ingest-only`, load average {load_before} "
        f"before, {load_average()} after), after ingest's batches were bounded by tokens "
        "instead of characters (`ingest.BATCH_CELLS`)."
    )
    checkpoint(report)
    section = render(report)
    print(section)
    if write:
        write_doc(section)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", default="2000,20000,100000")
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument(
        "--ingest-only",
        action="store_true",
        help="measure only the two real ingests again, into a fresh database, and keep the rest of the last "
        "run's report",
    )
    parser.add_argument("--synthetic", type=int, default=None, help=argparse.SUPPRESS)  # the subprocess
    args = parser.parse_args()
    if args.synthetic is not None:
        print(json.dumps(asyncio.run(_synthetic(args.synthetic))))
        return 0
    from provenance.store.embedded_pg import start_embedded, stop_embedded

    started = time.monotonic()
    report: dict[str, Any] = {"machine": machine(), "load_before": load_average(), "ingests": [], "servers": []}
    if args.ingest_only:
        return ingest_only(not args.no_write)
    data_dir = Path(tempfile.mkdtemp(prefix="provenance-corpus-scale-"))
    try:
        env = {k: v for k, v in os.environ.items() if k not in ("DB_SCHEMA", "PROFILE", "ANTHROPIC_API_KEY")}
        env.update(DATA_DIR=str(data_dir), LOG_LEVEL="warning")
        env["DATABASE_URL"] = start_embedded(data_dir / "pg")
        os.environ.update(DATA_DIR=env["DATA_DIR"], DATABASE_URL=env["DATABASE_URL"])
        evals = load_questions()
        log("ingest corpus/")
        report["ingests"].append(real_ingest(env, REPO_ROOT / "corpus", "default"))
        report["ingests"][-1]["embedder_pps"] = embedder_speed(REPO_ROOT / "corpus")
        report["servers"].append(serve(data_dir, "corpus/ alone (a fresh database)", evals, None))
        log("ingest the 18F handbook")
        report["ingests"].append(real_ingest(env, HANDBOOK, "18f"))
        report["ingests"][-1]["embedder_pps"] = embedder_speed(HANDBOOK)
        handbook = handbook_questions()
        report["servers"].append(serve(data_dir, "corpus/ and the 18F handbook", handbook[:UNCACHED_REQUESTS], "18f"))
        checkpoint(report)
        report["synthetic"] = []
        for size in [int(s) for s in args.sizes.split(",") if s]:
            log(f"{size:,} passages")
            report["synthetic"].append(synthetic_ingest(env, size))
            checkpoint(report)
            report["servers"].append(serve(data_dir, f"{size:,} passages (corpus/ and synthetic) and 18F", evals, None))
            checkpoint(report)
    finally:
        stop_embedded(data_dir / "pg")
        shutil.rmtree(data_dir, ignore_errors=True)
    report["wall_s"] = time.monotonic() - started
    report["load_after"] = load_average()
    checkpoint(report)
    section = render(report)
    print(section)
    if not args.no_write:
        write_doc(section)
        log(f"wrote {DOC.relative_to(REPO_ROOT)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
