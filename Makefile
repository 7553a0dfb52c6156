# The two set-up commands: `make demo` (the main job) and `make test` (the tests).
# Each creates and fills the virtual environment from the project's own files when missing.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO := out/demo
TOUR := out/tour

.PHONY: demo tour act-prm test lint sysdeps bench clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0  # the CPU build first: anything unpinned would fetch CUDA
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

# The main job: train a tiny policy on the CPU, evaluate its checkpoints, ingest, analyse, report.
demo: $(STAMP)
	rm -rf $(DEMO)
	$(BIN)/rolloutlab demo --out $(DEMO)

# The observing half on its own: a generated verl dump and two real samples, ingested and explained.
tour: $(STAMP)
	$(BIN)/python -m rolloutlab.demo_data $(TOUR)/sources
	$(BIN)/rolloutlab ingest $(TOUR)/sources/verl_rollouts --store $(TOUR)/store --name verl-demo --label arm=demo
	$(BIN)/rolloutlab ingest tests/fixtures/samples/nemo_gym/grl_sokoban.rollouts.jsonl --store $(TOUR)/store
	$(BIN)/rolloutlab ingest tests/fixtures/samples/inspect/browser.json --store $(TOUR)/store
	$(BIN)/rolloutlab runs --store $(TOUR)/store
	$(BIN)/rolloutlab show verl-demo --store $(TOUR)/store
	$(BIN)/rolloutlab sql "SELECT step, count(DISTINCT group_id) AS groups, avg(reward) AS reward FROM trajectories WHERE run_id = 'verl-demo' GROUP BY step ORDER BY step LIMIT 5" --store $(TOUR)/store
	$(BIN)/rolloutlab analyze verl-demo --store $(TOUR)/store
	$(BIN)/rolloutlab report verl-demo --store $(TOUR)/store -o $(TOUR)/report.html --png $(TOUR)/figures
	@echo "open $(TOUR)/report.html in a browser (offline, self-contained)"

# Act-PRM's loop on the CPU (docs/sft.md): RL briefly -> label the last five steps' trajectories
# with Monte-Carlo process rewards under the step-30 policy -> export the steps whose label is 1
# as think-act rows -> SFT the initial tiny model on them -> evaluate the start and the SFT model.
# The threshold and the epochs were chosen on the train split (docs/sft.md), not on the test split.
ACT := out/act-prm
act-prm: $(STAMP)
	rm -rf $(ACT)
	$(BIN)/rolloutlab train demo trainer.total_steps=30 trainer.save_every=10 trainer.threads=1 --out $(ACT)/rl
	$(BIN)/rolloutlab label $(ACT)/rl --method mc --n 4 --steps 26-30 --max-tokens 1 --concurrency 256 \
	  --policy hf:$(ACT)/rl/checkpoints/step_000030 --out $(ACT)/labelled
	$(BIN)/rolloutlab export $(ACT)/labelled --as rejection --by label --threshold 1 --out $(ACT)/best
	$(BIN)/rolloutlab sft $(ACT)/best sft_tiny epochs=64 threads=1 --out $(ACT)/sft
	$(BIN)/rolloutlab eval --env guess-number-v0 --checkpoints $(ACT)/sft/checkpoints --out $(ACT)/sft \
	  --episodes 128 --samples 2 --max-tokens 1 --concurrency 256 --split test

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy

# System packages some tests need, installed when missing and running as root (else those
# tests say how to install them): Debian's chromium for the browser tests, Java 17 for
# ScienceWorld (whose tests skip without it).
sysdeps:
	@missing=""; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	command -v java >/dev/null 2>&1 || missing="$$missing openjdk-17-jre-headless"; \
	if [ -n "$$missing" ]; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q $$missing; \
	  else echo "some tests need:$$missing (sudo apt-get install -y$$missing)"; fi; \
	fi

test: $(STAMP) lint sysdeps
	ROLLOUTLAB_REQUIRE_BROWSER=1 $(BIN)/python -m pytest tests

# Every benchmark, one after the other (each prints its ratios against its peer).
bench: $(STAMP)
	$(BIN)/pip install -q -e '.[bench]'  # polars and trl, the peers some benchmarks measure against
	for b in benchmarks/bench_*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) out .pytest_cache .ruff_cache .mypy_cache
