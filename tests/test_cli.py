"""The `provenance` command and `make run` as a user meets them: help written for people, a result and
nothing else on the terminal, errors in our words, and a warm `make run` that prints two lines."""

from __future__ import annotations

import asyncio
import http.client
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import asyncpg
import httpx
import pytest

from provenance.settings import REPO_ROOT
from tests.conftest import CORPUS, LiveServer

# Settings a developer's shell may hold; each test says what it wants instead.
_SETTINGS_VARS = ("DATABASE_URL", "DB_SCHEMA", "DATA_DIR", "CORPUS_DIR", "PROFILE", "ANTHROPIC_API_KEY", "LOG_LEVEL")
# Under `make test` these would make the inner make announce "Entering directory".
_MAKE_VARS = ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")


def clean_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in _SETTINGS_VARS + _MAKE_VARS}
    env.update(extra)
    return env


def provenance(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "provenance", *args], env=env, capture_output=True, text=True, timeout=120
    )


def test_help_is_written_for_users() -> None:
    r = provenance("--help", env=clean_env())
    assert r.returncode == 0
    assert "as issues land" not in r.stdout
    for command in ("serve", "ingest", "corpora", "keys", "db", "warm-cache", "evals"):
        assert command in r.stdout
    from provenance.ingest.documents.read import SUFFIXES

    # Every format ingest reads, named where a newcomer looks: the command list and the getting-started lines.
    for part in r.stdout.split("getting started:"):
        assert all(suffix in part for suffix in SUFFIXES), part
    assert "provenance serve --ingest" in r.stdout  # how to start, not only what exists
    assert "DATABASE_URL" in r.stdout


def test_a_command_group_without_its_action_shows_its_help() -> None:
    # argparse alone says "the following arguments are required: keys_command".
    r = provenance("keys", env=clean_env())
    assert r.returncode == 2
    assert "keys_command" not in r.stderr
    assert "create" in r.stderr and "revoke" in r.stderr and "list" in r.stderr


@pytest.fixture
def cli_env(pg_dsn: str, tmp_path: Path) -> Iterator[dict[str, str]]:
    """The real database, in a schema of this test's own."""
    schema = f"t_cli_{uuid.uuid4().hex[:8]}"
    yield clean_env(DATABASE_URL=pg_dsn, DB_SCHEMA=schema, DATA_DIR=str(tmp_path), LOG_LEVEL="info")

    async def drop() -> None:
        conn = await asyncpg.connect(pg_dsn)
        try:
            await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        finally:
            await conn.close()

    asyncio.run(drop())


def test_keys_create_prints_only_the_key_and_refuses_a_taken_name(cli_env: dict[str, str]) -> None:
    first = provenance("keys", "create", "reporting-app", env=cli_env)
    assert first.returncode == 0, first.stderr
    assert first.stdout.startswith("pv_") and len(first.stdout.splitlines()) == 1
    assert first.stderr.splitlines() == [
        "created API key 'reporting-app' (reader); it is shown only now, so store it safely"
    ]

    again = provenance("keys", "create", "reporting-app", env=cli_env)
    assert again.returncode == 2
    assert again.stdout == ""
    assert again.stderr.strip() == "error: a key named 'reporting-app' already exists (revoked names stay taken)"


def test_a_missing_folder_is_one_line_in_our_words(cli_env: dict[str, str], tmp_path: Path) -> None:
    r = provenance("ingest", str(tmp_path / "no-such-folder"), env=cli_env)
    assert r.returncode == 2
    assert r.stdout == ""
    assert r.stderr.strip() == f"error: corpus folder not found: {tmp_path / 'no-such-folder'}"


# ---------- a user's mistakes: one line on stderr, exit code 2, before any work ----------


def assert_mistake(r: subprocess.CompletedProcess[str], says: str) -> None:
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert r.stdout == ""
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, r.stderr
    assert says in lines[0], lines[0]
    assert "Traceback" not in r.stderr


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (("serve", "--port", "eighty"), "provenance serve: error: argument --port: invalid int value: 'eighty'"),
        (("ingest", "--replcae"), "provenance: error: unrecognized arguments: --replcae"),
        (("evals", "--profile", "gpt"), "provenance evals: error: argument --profile: invalid choice: 'gpt'"),
        (("corpora", "remove"), "provenance corpora remove: error: the following arguments are required: name"),
        (("serves",), "provenance: error: argument COMMAND: invalid choice: 'serves'"),
    ],
)
def test_an_argument_the_parser_rejects_is_one_line(args: tuple[str, ...], says: str) -> None:
    assert_mistake(provenance(*args, env=clean_env()), says)


def test_a_setting_out_of_bounds_stops_every_command_in_one_line() -> None:
    for args in (("serve",), ("db", "migrate"), ("ingest",), ("corpora",), ("keys", "list")):
        assert_mistake(provenance(*args, env=clean_env(GATE_THRESHOLD="2")), "configuration error: GATE_THRESHOLD")


def test_mistakes_found_before_the_database_is_opened(tmp_path: Path) -> None:
    # DATABASE_URL points nowhere: a command that got as far as the database would fail another way.
    env = clean_env(DATABASE_URL="postgresql://nobody@127.0.0.1:9/none", DATA_DIR=str(tmp_path))
    assert_mistake(provenance("ingest", str(CORPUS), "--corpus", "My Corpus", env=env), "corpus name 'My Corpus'")
    assert_mistake(provenance("ingest", str(tmp_path / "nowhere"), env=env), "corpus folder not found: ")
    assert_mistake(provenance("keys", "create", "a key", env=env), "a key name is 1-64 letters")
    assert_mistake(provenance("corpora", "remove", "default", env=env), "pass --force to remove it anyway")
    assert_mistake(provenance("warm-cache", env={**env, "CACHE_TTL_S": "0"}), "CACHE_TTL_S is 0")
    assert_mistake(provenance("feedback", "stats", "--since", "last tuesday", env=env), "last tuesday")


def test_evals_checks_its_cases_and_options_before_loading_a_model(tmp_path: Path) -> None:
    env = clean_env(DATABASE_URL="postgresql://nobody@127.0.0.1:9/none", DATA_DIR=str(tmp_path))
    # What `provenance feedback export` writes: a case left for review has no expect yet.
    exported = tmp_path / "feedback.jsonl"
    exported.write_text(
        '{"id": "fb-1", "bucket": "feedback", "question": "Is the pool open?", "expect": null, '
        '"mustIncludeAny": [], "needsReview": true}\n',
        encoding="utf-8",
    )
    assert_mistake(provenance("evals", "--cases", str(exported), env=env), "1 case(s) left for review")
    broken = tmp_path / "broken.jsonl"
    broken.write_text("{not json\n", encoding="utf-8")
    assert_mistake(provenance("evals", "--cases", str(broken), env=env), "error: ")
    assert_mistake(provenance("evals", "--cases", str(tmp_path / "none.jsonl"), env=env), "no cases file at ")
    assert_mistake(provenance("evals", "--k-sweep", "2,four", env=env), "--k-sweep takes comma-separated")
    assert_mistake(provenance("evals", "--corpus", str(tmp_path / "gone"), env=env), "corpus folder not found")
    assert_mistake(provenance("evals", "--profile", "anthropic", env=env), "needs ANTHROPIC_API_KEY")


def test_mistakes_the_database_reveals(cli_env: dict[str, str]) -> None:
    assert_mistake(provenance("keys", "revoke", "nobody", env=cli_env), "no active key named 'nobody'")
    assert_mistake(provenance("warm-cache", "--corpus", "nursery", env=cli_env), "no corpus named 'nursery'")
    assert_mistake(provenance("corpora", "remove", "nursery", env=cli_env), "no corpus named 'nursery'")
    assert_mistake(provenance("evals", "--corpus", "nursery", env=cli_env), "'nursery' is neither a folder")


# ---------- make run ----------


class MakeRun:
    """`make run` as a user starts it, in its own process group so that Ctrl-C can be sent as a terminal does."""

    def __init__(self, env: dict[str, str]) -> None:
        self.port = 0  # the one the address line names
        # -o: never (re)install from a test; a warm start finds the install done anyway.
        self.proc = subprocess.Popen(
            ["make", "run", "-o", ".venv/.installed"],
            cwd=REPO_ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
            start_new_session=True,
        )
        self.lines: list[str] = []

    def start_up(self) -> list[str]:
        """Every line printed until the address line, once the server really answers."""
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.append(line.rstrip("\n"))
            if line.startswith("serving on "):
                self.port = int(line.split()[2].rsplit(":", 1)[1])
                break
        else:
            raise AssertionError("make run stopped before serving:\n" + "\n".join(self.lines))
        deadline = time.monotonic() + 120
        while True:
            try:
                if httpx.get(f"http://127.0.0.1:{self.port}/healthz", timeout=5).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            if time.monotonic() > deadline or self.proc.poll() is not None:
                raise AssertionError("the server never answered /healthz:\n" + "\n".join(self.lines))
            time.sleep(0.2)
        return list(self.lines)

    def stop(self) -> list[str]:
        """Ctrl-C; what was printed after the start-up lines."""
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGINT)
        rest, _ = self.proc.communicate(timeout=60)
        return [line for line in rest.splitlines() if line.strip()]


def _idle_until_closed(port: int) -> float:
    """Seconds from a kept-alive response to the server closing the idle connection."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=60)
    try:
        conn.request("GET", "/healthz")
        response = conn.getresponse()
        response.read()
        assert response.status == 200 and response.getheader("connection") != "close"
        answered = time.monotonic()
        assert conn.sock is not None
        assert conn.sock.recv(1) == b""  # blocks until the server closes it (or the 60 s timeout raises)
        return time.monotonic() - answered
    finally:
        conn.close()


@pytest.fixture
def small_corpus() -> Iterator[Path]:
    root = Path(tempfile.mkdtemp(prefix="provenance-cli-corpus-"))
    # Two chapters: embedding them is most of a cold start.
    for name in ("02-hours-and-access.md", "05-storage-and-lockers.md"):
        shutil.copy(CORPUS / name, root / name)
    yield root
    shutil.rmtree(root, ignore_errors=True)


@pytest.mark.skipif(shutil.which("make") is None, reason="make is not installed")
def test_a_warm_make_run_prints_the_two_lines_the_readme_promises(tmp_path: Path, small_corpus: Path) -> None:
    # Port 0: the server binds a free port and says which (a port picked free here could be taken first).
    env = clean_env(DATA_DIR=str(tmp_path / "data"), CORPUS_DIR=str(small_corpus), PORT="0")

    cold = MakeRun(env)
    try:
        lines = cold.start_up()
    finally:
        after = cold.stop()
    assert lines[0].startswith("ingested 2 files into corpus default: "), lines
    # The port printed is the one that answered /healthz (start_up), a real one.
    assert cold.port > 0
    assert lines[1:] == [f"serving on http://127.0.0.1:{cold.port} (profile local); Ctrl-C stops"]
    assert not [line for line in after if "Interrupt" not in line], after  # make's own note on Ctrl-C only

    # KEEP_ALIVE_S above uvicorn's own 5 s, as behind a proxy that keeps idle connections longer.
    warm = MakeRun({**env, "KEEP_ALIVE_S": "7"})
    try:
        lines = warm.start_up()
        idle_s = _idle_until_closed(warm.port)
    finally:
        warm.stop()
    assert 6.0 < idle_s < 30.0, idle_s
    assert len(lines) == 2, lines
    assert lines[0].startswith("corpus default unchanged ("), lines
    assert lines[1] == f"serving on http://127.0.0.1:{warm.port} (profile local); Ctrl-C stops"

    # What initdb and pg_ctl said is kept, in a file under the data folder.
    transcript = (tmp_path / "data" / "embedded-postgres.log").read_text()
    assert "initdb" in transcript and "pg_ctl" in transcript


@pytest.mark.parametrize("client", ["httpx", "httpx2"])
def test_http_client_requests_are_logged_only_when_debugging(live_server: LiveServer, client: str) -> None:
    # What the Turnstile check sends goes through httpx, and the anthropic SDK's calls through its fork httpx2;
    # both log each request at INFO, as plain text among our JSON lines.
    script = (
        f"import sys, {client}; from provenance.logs import configure_logging; configure_logging(sys.argv[1]); "
        f"{client}.get(sys.argv[2])"
    )
    url = f"{live_server.url}/healthz"
    quiet = subprocess.run([sys.executable, "-c", script, "info", url], capture_output=True, text=True, timeout=60)
    assert quiet.returncode == 0 and quiet.stderr == "" and quiet.stdout == ""
    loud = subprocess.run([sys.executable, "-c", script, "debug", url], capture_output=True, text=True, timeout=60)
    assert "HTTP Request: GET" in loud.stderr


def test_ingest_bounds_the_allocator_on_glibc() -> None:
    import platform

    from provenance.ingest.memory import bound_allocator

    # mallopt answers 1 when glibc took the setting; elsewhere the call is skipped, never an error.
    expected = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"
    assert bound_allocator() is expected
