"""The model server's port is read from its log, which llama.cpp writes to as well, in pieces: the line
`serve_forever` writes is found wherever llama.cpp's pieces land around it (a CI run's log had one piece on
each side of it, and the start waited out its 120 s)."""

from __future__ import annotations

from pathlib import Path

from provenance.inference.llm_server import _served_port


def _log(tmp_path: Path, text: bytes) -> Path:
    log = tmp_path / "judge.log"
    log.write_bytes(text)
    return log


def test_the_port_is_found_with_llama_cpp_pieces_on_either_side_of_the_line(tmp_path: Path) -> None:
    # As in the CI run's log, with the line as it is written now: a timestamp before it, a message after it.
    log = _log(
        tmp_path,
        b"0.01.010.389 I srv    load_model: initializing, n_slots = 1\n"
        b"0.01.014.213 serving SmolLM2-135M-Instruct.Q4_1.gguf on http://127.0.0.1:43101 (ready)\n"
        b"I srv          init: model loaded\n",
    )
    assert _served_port(log, 0) == 43101
    # A piece starting with digits right after the port does not become part of it.
    log = _log(tmp_path, b"serving m.gguf on http://127.0.0.1:43101 (ready)0.01.014.233 I srv listening\n")
    assert _served_port(log, 0) == 43101


def test_no_port_before_the_line_and_only_this_starts_lines_count(tmp_path: Path) -> None:
    # llama.cpp's own "listening on" is not the line: the server answers only once serve_forever says so.
    log = _log(
        tmp_path,
        b"0.00.008.681 I srv init: loading model\n0.01.014.233 I srv init: listening on http://127.0.0.1:43101\n",
    )
    assert _served_port(log, 0) == 0
    earlier = b"serving m.gguf on http://127.0.0.1:40000 (ready)\n"
    log = _log(tmp_path, earlier + b"serving m.gguf on http://127.0.0.1:40001 (ready)\n")
    # A restarted server's lines follow the earlier start's in the same log: only those past the offset count.
    assert _served_port(log, len(earlier)) == 40001
