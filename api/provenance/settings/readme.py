"""The README's settings table, generated from the fields: `make settings-table` (`python -m
provenance.settings.readme`) rewrites it, and tests/test_settings.py fails when the README's differs."""

from __future__ import annotations

import sys
from pathlib import Path

from provenance.settings import DECLARED, REPO_ROOT

HEADER = "| variable | default | meaning |"


def readme_table() -> str:
    """One row per variable, in the order the fields are declared."""
    rows = [f"| `{v.name}` | {v.shown_default} | {v.meta.description} |" for v in DECLARED]
    return "\n".join([HEADER, "|---|---|---|", *rows])


def table_in(readme: str) -> str:
    """The README's table as it stands: from its header to the first blank line."""
    start = readme.index(HEADER)
    end = readme.index("\n\n", start)
    return readme[start:end]


def main(readme: Path = REPO_ROOT / "README.md") -> int:
    text = readme.read_text(encoding="utf-8")
    table = readme_table()
    if table_in(text) == table:
        print("README.md's settings table is up to date")
        return 0
    readme.write_text(text.replace(table_in(text), table), encoding="utf-8")
    print(f"rewrote README.md's settings table ({len(DECLARED)} variables)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
