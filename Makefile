# The two set-up commands: `make demo` (the main job) and `make test` (the tests).
# Each creates and fills the virtual environment from the project's own files when missing.
PY ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DEMO := out/demo

.PHONY: demo test lint browser bench clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q torch==2.13.0  # the CPU build first: anything unpinned would fetch CUDA
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
	$(BIN)/rolloutlab report verl-demo --store $(DEMO)/store -o $(DEMO)/report.html --png $(DEMO)/figures
	@echo "open $(DEMO)/report.html in a browser (offline, self-contained)"

lint: $(STAMP)
	$(BIN)/ruff check src tests benchmarks
	$(BIN)/mypy

# The browser tests drive Debian's chromium (a fresh machine has none): installed here when
# running as root, else the tests fail with a message saying how to install it.
browser:
	@if ! command -v chromium >/dev/null 2>&1; then \
	  if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium; \
	  else echo "browser tests need Debian's chromium: sudo apt-get install -y chromium"; fi; \
	fi

test: $(STAMP) lint browser
	ROLLOUTLAB_REQUIRE_BROWSER=1 $(BIN)/python -m pytest tests

bench: $(STAMP)
	$(BIN)/python benchmarks/bench_ingest.py

clean:
	rm -rf $(VENV) out .pytest_cache .ruff_cache .mypy_cache
