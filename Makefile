# durable_graph — every developer task in one place. `make test` is what CI runs.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: all venv pg-deps lint format test demo bench soak chaos clean

all: test

# The virtualenv is rebuilt when pyproject.toml changes.
$(VENV)/.installed: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test]'
	touch $@

venv: $(VENV)/.installed

# PostgreSQL server binaries for the throwaway test server (skipped when a DSN is given).
pg-deps:
	@if [ -z "$$DURABLE_GRAPH_TEST_DSN" ] && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
		echo "installing the PostgreSQL server package"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq postgresql postgresql-contrib >/dev/null; \
	fi

lint: venv
	$(VENV)/bin/ruff check python tests
	$(VENV)/bin/ruff format --check python tests
	$(VENV)/bin/mypy
	$(VENV)/bin/mypy --strict tests

format: venv
	$(VENV)/bin/ruff check --fix python tests
	$(VENV)/bin/ruff format python tests

test: venv pg-deps lint
	$(VENV)/bin/pytest $(PYTEST_ARGS)

# The main job on the embedded default: SQLite in a temporary file, no server.
demo: venv
	$(VENV)/bin/durable-graph demo --sqlite "$$(mktemp -d)/demo.db"

# Benchmarks against the anchors on one throwaway PostgreSQL (durable: fsync on).
bench: venv pg-deps
	$(VENV)/bin/pip install -q -e '.[test,bench]'
	$(VENV)/bin/python -m tests.bench.run --out bench-results.md
	$(VENV)/bin/python -m tests.bench.fast_path --out bench-fast-path.md

# Long randomized differential runs and the long chaos run.
soak: venv pg-deps
	DURABLE_GRAPH_DIFF_EXAMPLES=2000 $(VENV)/bin/pytest tests/test_differential.py $(PYTEST_ARGS)

chaos: venv pg-deps
	DURABLE_GRAPH_CHAOS=long $(VENV)/bin/pytest -s tests/test_chaos.py $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache durable_graph.db*
