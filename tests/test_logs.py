"""Every log line is one JSON object: structlog's own, and the standard library's records too (asyncpg,
uvicorn), which would otherwise print plain text and multi-line tracebacks among them."""

from __future__ import annotations

import json
import subprocess
import sys

SCRIPT = """
import logging
from provenance.app import create_app
from provenance.settings import load_settings
# The app configures logging as the server starts it; the web framework must not put its own handler back.
create_app(load_settings({"LOG_LEVEL": "info"}))
logging.getLogger("uvicorn.error").warning("Invalid HTTP request received.")
try:
    raise TimeoutError()
except TimeoutError:
    logging.getLogger("asyncpg.pool").warning("Failed to restore the pool connection floor; retrying", exc_info=True)
try:
    raise ValueError("bad value")
except ValueError:
    logging.getLogger("provenance.other").exception("failed on %s", "purpose")
logging.getLogger("asyncpg.pool").debug("not shown at info")
"""


def test_standard_library_records_are_json_lines_and_an_outage_retry_is_one_line() -> None:
    done = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    records = [json.loads(line) for line in done.stderr.splitlines()]
    assert [(r["logger"], r["level"]) for r in records] == [
        ("uvicorn.error", "warning"),
        ("asyncpg.pool", "warning"),
        ("provenance.other", "error"),
    ]
    assert all("timestamp" in r for r in records)
    # A reconnect attempt that timed out names its error and leaves the traceback out...
    assert records[1]["event"] == "Failed to restore the pool connection floor; retrying: TimeoutError()"
    assert "exception" not in records[1]
    # ... while any other error keeps its traceback, inside the one JSON line.
    assert records[2]["event"] == "failed on purpose"
    assert "Traceback" in records[2]["exception"] and "ValueError: bad value" in records[2]["exception"]
