"""Helpers shared by the benchmarks: a throwaway schema on the embedded (or configured) Postgres."""

from __future__ import annotations

import os
import platform
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

import asyncpg

from provenance.settings import Settings, load_settings
from provenance.store import Store
from provenance.store.pool import create_pool, migrate, resolve_database_url


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return 0.0
    index = min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))
    return ordered[index]


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in subprocess.run(["lscpu"], capture_output=True, text=True, check=False).stdout.splitlines():
            if line.startswith("Model name:"):
                cpu = line.split(":", 1)[1].strip()
    except OSError:
        pass
    mem_gib = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    python = platform.python_version()
    return f"{os.cpu_count()} cores ({cpu}), {mem_gib:.0f} GiB RAM, Python {python}, {platform.system()}"


@asynccontextmanager
async def scratch_store(settings: Settings | None = None) -> AsyncIterator[tuple[Store, Settings]]:
    base = settings or load_settings()
    scratch = base.with_overrides(db_schema=f"bench_{uuid.uuid4().hex[:8]}", log_level="warning")
    dsn = resolve_database_url(scratch)
    pool = await create_pool(dsn, scratch)
    await migrate(pool)
    try:
        yield Store(pool), scratch
    finally:
        await pool.close()
        conn = await asyncpg.connect(dsn)
        await conn.execute(f'DROP SCHEMA IF EXISTS "{scratch.database.schema}" CASCADE')  # generated name
        await conn.close()


@contextmanager
def embedded_data_dir(prefix: str) -> Iterator[Path]:
    """A throwaway DATA_DIR with the embedded Postgres started in it; DATA_DIR and DATABASE_URL are set for
    this process and the servers it starts (they join that Postgres). Removed afterwards."""
    from provenance.store.embedded_pg import start_embedded, stop_embedded

    data_dir = Path(tempfile.mkdtemp(prefix=prefix))
    os.environ["DATA_DIR"] = str(data_dir)
    try:
        os.environ["DATABASE_URL"] = start_embedded(data_dir / "pg")
        yield data_dir
    finally:
        stop_embedded(data_dir / "pg")
        shutil.rmtree(data_dir, ignore_errors=True)


def write_section(doc: Path, begin: str, end: str, section: str) -> None:
    """Replace what lies between the markers `begin` and `end` in `doc` (which `section` holds too), or add
    `section` at the end when the markers aren't there yet."""
    text = doc.read_text()
    if begin in text and end in text:
        head, rest = text.split(begin, 1)
        text = head + section + rest.split(end, 1)[1]
    else:
        text = text.rstrip("\n") + "\n\n" + section + "\n"
    doc.write_text(text)
