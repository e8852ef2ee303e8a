"""The cached path's gap to its floor, commit by commit: what each step of closing it bought.

    .venv/bin/python -m bench.cached_steps [--concurrency 8] [--rounds 2] LABEL=REV [LABEL=REV ...]

Each revision is checked out into a temporary git worktree and served from there (`provenance serve` of
that revision, on its own embedded Postgres), while this checkout's bench/floor.py measures it beside the
floor app at one concurrency, same as `make bench` does for the current code. The floor app and the load
generator are this checkout's, so only the server changes from row to row. Prints a Markdown table.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from bench import floor
from bench.common import embedded_data_dir, machine
from bench.server import REPO_ROOT, load_questions
from provenance.report import table


def _worktree(rev: str, into: Path) -> Path:
    subprocess.run(["git", "-C", str(REPO_ROOT), "worktree", "add", "-q", "--detach", str(into), rev], check=True)
    # The package sat in api/ (mapped by setuptools) before it moved to api/provenance/: give Python a path
    # that imports that revision's `provenance` either way.
    if (into / "api" / "provenance").is_dir():
        return into / "api"
    shim = into / ".shim"
    shim.mkdir()
    (shim / "provenance").symlink_to(into / "api")
    return shim


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("steps", nargs="+", help="LABEL=REV, in order")
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--requests", type=int, default=4000)
    args = parser.parse_args()
    print(f"machine: {machine()}; load average before: {os.getloadavg()}", flush=True)
    rows = []
    for step in args.steps:
        label, _, rev = step.partition("=")
        tmp = Path(tempfile.mkdtemp(prefix="provenance-step-"))
        try:
            package_path = _worktree(rev, tmp / "tree")
            # The servers (the real one and the floor app) import the revision's package; bench is this
            # checkout's.
            os.environ["PYTHONPATH"] = os.pathsep.join([str(package_path), str(REPO_ROOT)])
            with embedded_data_dir("provenance-steps-") as data_dir:
                report = floor.measure(
                    data_dir,
                    load_questions(),
                    rounds=args.rounds,
                    requests={args.concurrency: args.requests},
                    concurrencies=(args.concurrency,),
                )
            pair = report.pairs[0]
            rows.append((label, rev, pair))
            print(
                f"{label} ({rev}): real {pair.real.throughput:.0f} req/s, floor {pair.floor.throughput:.0f}, "
                f"ratio {pair.ratio:.2f}",
                flush=True,
            )
        finally:
            subprocess.run(
                ["git", "-C", str(REPO_ROOT), "worktree", "remove", "--force", str(tmp / "tree")], check=False
            )
            shutil.rmtree(tmp, ignore_errors=True)
    print(f"load average after: {os.getloadavg()}")
    head = ("step", "revision", "real req/s", "real p99 ms", "floor req/s", f"real / floor (c={args.concurrency})")
    figures = [
        [
            label,
            f"`{rev}`",
            f"{p.real.throughput:.0f}",
            f"{p.real.rt(0.99):.1f}",
            f"{p.floor.throughput:.0f}",
            f"{p.ratio:.2f}",
        ]
        for label, rev, p in rows
    ]
    print("\n" + "\n".join(table(head, "llrrrr", figures)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
