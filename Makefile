# The two set-up commands: `make demo` (the main job) and `make test` (the tests).
# Each creates and fills the virtual environment from the project's own files when missing.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO := out/demo

.PHONY: demo test lint bench clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m rolloutlab.demo_data $(DEMO)/sources
	$(BIN)/rolloutlab ingest $(DEMO)/sources/verl_rollouts --store $(DEMO)/store --name verl-demo --label arm=demo
	$(BIN)/rolloutlab ingest tests/fixtures/samples/nemo_gym/grl_sokoban.rollouts.jsonl --store $(DEMO)/store
	$(BIN)/rolloutlab ingest tests/fixtures/samples/inspect/browser.json --store $(DEMO)/store
	$(BIN)/rolloutlab runs --store $(DEMO)/store
	$(BIN)/rolloutlab show verl-demo --store $(DEMO)/store
	$(BIN)/rolloutlab sql "SELECT step, count(DISTINCT group_id) AS groups, avg(reward) AS reward FROM trajectories WHERE run_id = 'verl-demo' GROUP BY step ORDER BY step LIMIT 5" --store $(DEMO)/store
	$(BIN)/rolloutlab analyze verl-demo --store $(DEMO)/store

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy

test: $(STAMP) lint
	$(BIN)/python -m pytest tests

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_ingest.py

clean:
	rm -rf $(VENV) out .pytest_cache .ruff_cache .mypy_cache
