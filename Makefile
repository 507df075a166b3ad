# durable_graph — every developer task in one place. `make test` is what CI runs.
SHELL := /bin/bash
VENV ?= .venv
PY := $(VENV)/bin/python
PYTEST_ARGS ?=

.PHONY: all venv pg-deps ha-deps node-deps plprofiler-deps browser-deps js-suite browser-suite lint format generate api-manifest test langgraph-suite langgraph-store-suite service-suite demo bench bench-retention soak chaos failover-suite clean service-reference

all: test

# The virtualenv is rebuilt when pyproject.toml changes.
$(VENV)/.installed: pyproject.toml
	test -x $(PY) || python3 -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[test,langgraph,langgraph-suite]'
	touch $@

venv: $(VENV)/.installed

# PostgreSQL server binaries for the throwaway test server (skipped when a DSN is given).
pg-deps:
	@if [ -z "$$DURABLE_GRAPH_TEST_DSN" ] && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then \
		echo "installing the PostgreSQL server package"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq postgresql postgresql-contrib >/dev/null; \
	fi
	@# plpgsql_check for tests/test_plpgsql_check.py, matching the newest server (the test's).
	@if [ -z "$$DURABLE_GRAPH_TEST_DSN" ] && ! ls /usr/share/postgresql/*/extension/plpgsql_check.control >/dev/null 2>&1; then \
		ver=$$(ls /usr/lib/postgresql | sort -n | tail -1); \
		echo "installing postgresql-$$ver-plpgsql-check"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq postgresql-$$ver-plpgsql-check >/dev/null; \
	fi
	@# PL/Proxy for tests/test_partitions.py (the store over partitions, SPEC §16).
	@if [ -z "$$DURABLE_GRAPH_TEST_DSN" ] && ! ls /usr/share/postgresql/*/extension/plproxy.control >/dev/null 2>&1; then \
		ver=$$(ls /usr/lib/postgresql | sort -n | tail -1); \
		echo "installing postgresql-$$ver-plproxy"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq postgresql-$$ver-plproxy >/dev/null; \
	fi

# plprofiler for `make bench`'s PL/pgSQL profile (tests/bench/plprofile.py, issue 49).
plprofiler-deps: pg-deps
	@if ! ls /usr/share/postgresql/*/extension/plprofiler.control >/dev/null 2>&1; then \
		ver=$$(ls /usr/lib/postgresql | sort -n | tail -1); \
		echo "installing postgresql-$$ver-plprofiler"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq postgresql-$$ver-plprofiler >/dev/null; \
	fi

# node-postgres for tests/test_node.py (the SQL API driven from Node.js), from package-lock.json.
tests/node/node_modules/.package-lock.json: tests/node/package-lock.json
	cd tests/node && npm ci --no-audit --no-fund --loglevel=error

node-deps: tests/node/node_modules/.package-lock.json

lint: venv
	$(VENV)/bin/ruff check python tests tools
	$(VENV)/bin/ruff format --check python tests tools
	$(VENV)/bin/mypy
	$(VENV)/bin/mypy --strict tests
	$(VENV)/bin/mypy --strict tools

format: venv
	$(VENV)/bin/ruff check --fix python tests
	$(VENV)/bin/ruff format python tests

# The store methods written out from the Protocols and the PostgreSQL call builders
# (tools/generate_stores.py; tests/test_generated.py fails when a generated file is not current).
generate: venv
	$(PY) tools/generate_stores.py

# The public SQL API's manifest, sql/api.json (SPEC §23.1): every dg_* function of a fresh install
# recorded, a released one never rewritten (tools/sql_api_manifest.py; tests/test_sql_api.py
# fails when the schema departs from it). On DURABLE_GRAPH_TEST_DSN's server, else a throwaway one.
api-manifest: venv pg-deps
	$(PY) tools/sql_api_manifest.py

test: venv pg-deps node-deps lint
	$(VENV)/bin/pytest $(PYTEST_ARGS)

# LangGraph's own test suite (the pinned langgraph sdist's tests, downloaded from PyPI) against
# our savers and LangGraph's own on memory, SQLite and PostgreSQL, sync and async; counts per saver
# in langgraph-suite.md (junit files kept in build/langgraph-suite/last-run: `--report-only`
# counts them again). `make test` runs its short subset (tests/test_langgraph_suite.py).
langgraph-suite: venv pg-deps langgraph-store-suite
	$(PY) -m tests.langgraph_suite.run --subset all --checkpoint-postgres --out langgraph-suite.md \
		--keep build/langgraph-suite/last-run $(PYTEST_ARGS)

# langgraph-checkpoint-postgres's store tests (test_store, test_async_store of its pinned sdist,
# downloaded from PyPI) on DurableStore over memory, SQLite and PostgreSQL, beside PostgresStore
# itself, their semantic search tests (an index) included, and langgraph-checkpoint's
# InMemoryStore semantic search tests on ours; counts in langgraph-store-suite.md, exit 1 for a
# test LangGraph's store passes and ours not, or a semantic search test ours fails.
langgraph-store-suite: venv pg-deps
	$(PY) -m tests.langgraph_suite.store_suite --out langgraph-store-suite.md \
		--keep build/langgraph-suite/last-run $(PYTEST_ARGS)

# The main job on the embedded default: SQLite in a temporary file, no server. Installs only
# what the demo needs (the package and the dashboard's two packages), showing pip's progress;
# a full developer venv (`make venv`) already has them.
$(VENV)/.demo-installed: pyproject.toml
	@test -x $(PY) || { echo "creating $(VENV)"; python3 -m venv $(VENV); }
	@echo "installing durable-graph with its dashboard into $(VENV)"
	$(PY) -m pip install --progress-bar on -e '.[dashboard]'
	touch $@

demo: $(VENV)/.demo-installed
	$(VENV)/bin/durable-graph demo --sqlite "$$(mktemp -d)/demo.db"

# Benchmarks against the anchors on one throwaway PostgreSQL (durable: fsync on).
bench: venv pg-deps plprofiler-deps
	$(VENV)/bin/pip install -q -e '.[test,bench,langgraph]'
	$(VENV)/bin/python -m tests.bench.run --out bench-results.md
	$(VENV)/bin/python -m tests.bench.fast_path --out bench-fast-path.md
	$(VENV)/bin/python -m tests.bench.plprofile --out bench-plprofile.md
	$(VENV)/bin/python -m tests.bench.job_setups --out bench-job-setups.md
	$(VENV)/bin/python -m tests.bench.job_profile --out bench-job-profile.md
	$(VENV)/bin/python -m tests.bench.operating --out bench-operating.md
	$(VENV)/bin/python -m tests.bench.sqlite_writers --out bench-sqlite-writers.md
	$(VENV)/bin/python -m tests.bench.streaming --out bench-streaming.md
	test -x $(REF_VENV)/bin/langgraph || (python3 -m venv $(REF_VENV) && $(REF_VENV)/bin/pip install -q 'langgraph-cli[inmem]')
	$(VENV)/bin/pip install -q -e '.[service]'
	$(VENV)/bin/python -m tests.bench.retention --out bench-retention.md $(RETENTION_ARGS)
	$(VENV)/bin/python -m tests.bench.service_load --out bench-service-load.md

# Store growth over many runs with a keep_latest thread TTL, without, and PostgresSaver (issue 47;
# docs/retention.md). RETENTION_ARGS: e.g. --runs 20000 --mark 4000 for a shorter run.
bench-retention: venv pg-deps
	$(VENV)/bin/pip install -q -e '.[test,bench,langgraph,service]'
	$(VENV)/bin/python -m tests.bench.retention --out bench-retention.md $(RETENTION_ARGS)

# LangGraph's SDK integration suite (the sdists of the pinned langgraph-sdk and of 0.4.3, an
# earlier release users still run, downloaded from PyPI; 0.4.3's client in a virtualenv made at
# test time) with its own graphs against `langgraph dev` (the reference, in REF_VENV) and
# `durable-graph serve` on SQLite and PostgreSQL; every test per release and target in
# service-suite.md, and each the reference passes and we do not (exit 1 while there is one).
# Junit files and server logs in build/service-suite/last-run/sdk-<version>.
service-suite: venv pg-deps
	$(VENV)/bin/pip install -q -e '.[test,langgraph,langgraph-suite,service-suite]'
	test -x $(REF_VENV)/bin/langgraph || python3 -m venv $(REF_VENV)
	$(REF_VENV)/bin/pip install -q 'langgraph-cli[inmem]' 'langchain>=1.3' 'deepagents>=0.6.2'
	$(PY) -m tests.langgraph_suite.service --out service-suite.md \
		--keep build/service-suite/last-run $(PYTEST_ARGS)

# The service's client tests against LangGraph's own dev server too (langgraph-cli[inmem], in a
# virtualenv of its own so its pins never move the project's), so our answers match the reference.
REF_VENV ?= .venv-reference
service-reference: venv pg-deps
	test -x $(REF_VENV)/bin/langgraph || (python3 -m venv $(REF_VENV) && $(REF_VENV)/bin/pip install -q 'langgraph-cli[inmem]')
	DURABLE_GRAPH_LANGGRAPH_DEV=$(CURDIR)/$(REF_VENV)/bin/langgraph $(VENV)/bin/pytest tests/test_service.py $(PYTEST_ARGS)

# LangGraph's JavaScript SDK (@langchain/langgraph-sdk: the pinned release and the previous
# major's last, installed from npm at test time under build/js) in Node.js, and its React hook
# useStream in headless Chromium (a page bundled at test time with esbuild), against `serve` on
# SQLite and PostgreSQL and against `langgraph dev` (REF_VENV): tests/js_suite.py and
# tests/browser_suite.py, each test per target in the test id.
js-suite: venv pg-deps browser-deps
	test -x $(REF_VENV)/bin/langgraph || (python3 -m venv $(REF_VENV) && $(REF_VENV)/bin/pip install -q 'langgraph-cli[inmem]')
	DURABLE_GRAPH_LANGGRAPH_DEV=$(abspath $(REF_VENV))/bin/langgraph $(VENV)/bin/pytest tests/js_suite.py $(PYTEST_ARGS)

browser-suite: venv pg-deps browser-deps
	test -x $(REF_VENV)/bin/langgraph || (python3 -m venv $(REF_VENV) && $(REF_VENV)/bin/pip install -q 'langgraph-cli[inmem]')
	DURABLE_GRAPH_LANGGRAPH_DEV=$(abspath $(REF_VENV))/bin/langgraph $(VENV)/bin/pytest tests/browser_suite.py $(PYTEST_ARGS)

# Node.js with npm, and Debian's chromium (Playwright drives it; its own browsers are not fetched).
browser-deps:
	@command -v node >/dev/null && command -v npm >/dev/null || { \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq nodejs npm >/dev/null; }
	@test -x /usr/bin/chromium || { \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq chromium >/dev/null; }

# Long randomized differential runs, the 60 s parent/child race workload, and 11 minutes of a
# fleet through a failover, on one store and on 8 partitions (one partition server failing over).
soak: venv pg-deps
	DURABLE_GRAPH_DIFF_EXAMPLES=2000 $(VENV)/bin/pytest tests/test_differential.py $(PYTEST_ARGS)
	DURABLE_GRAPH_RACE_SECONDS=60 $(VENV)/bin/pytest -s tests/test_pg_races.py -k workload $(PYTEST_ARGS)
	DURABLE_GRAPH_FLEET=long $(VENV)/bin/pytest -s -p no:logging tests/test_failover.py $(PYTEST_ARGS)
	DURABLE_GRAPH_FLEET=long $(VENV)/bin/pytest -s -p no:logging tests/test_partitions_failover.py $(PYTEST_ARGS)

# pg_auto_failover (Debian's keeper and monitor) for `make failover-suite`.
ha-deps: pg-deps
	@if ! command -v pg_autoctl >/dev/null 2>&1 || ! ls /usr/share/postgresql/*/extension/pgautofailover.control >/dev/null 2>&1; then \
		ver=$$(ls /usr/lib/postgresql | sort -n | tail -1); \
		echo "installing pg-auto-failover-cli and postgresql-$$ver-auto-failover"; \
		SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
		$$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq pg-auto-failover-cli postgresql-$$ver-auto-failover >/dev/null; \
	fi

# Partitions failing over under load (SPEC §27): 3 pg_auto_failover formations (a primary and a
# synchronous standby each, one monitor) behind a proxy, 5 primary kills, then the same on
# asynchronous standbys, then docs/failover.md's DBA procedure as written. 7-10 minutes on 2
# cores; not part of `make test`.
failover-suite: venv ha-deps
	$(VENV)/bin/pytest -s -p no:logging tests/failover/ha_suite.py $(PYTEST_ARGS)

chaos: venv pg-deps
	DURABLE_GRAPH_CHAOS=long $(VENV)/bin/pytest -s tests/test_chaos.py $(PYTEST_ARGS)

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache durable_graph.db* tests/node/node_modules
