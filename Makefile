# Two commands matter:  `make demo`  and  `make test`.  Both bootstrap .venv by themselves.
# uv is used when it is on PATH; otherwise it is installed into .venv-bootstrap with pip.
SHELL := /bin/bash
PYTHON ?= python3
UV := $(shell command -v uv 2>/dev/null || echo .venv-bootstrap/bin/uv)
VENV := .venv
PY := $(VENV)/bin/python
# MassGen pins older openai/protobuf/wrapt releases: its integration tests get their own environment.
MG_VENV := .venv-massgen
# The OpenTelemetry reference GenAI instrumentation pins wrapt<2: the side-by-side test and the
# benchmark run it from an environment of its own.
REF_VENV := .venv-genai-ref
# The whole suite runs on the default Python; the lowest and the highest supported ones, when the machine
# has them and they differ from the default (on PATH or under pyenv; uv cannot download one here), run the
# tests whose behaviour depends on the Python or DuckDB version (tests/version_sensitive.py), beside it
# with the MassGen tests (tests/suites.sh).
# Python 3.10 gets DuckDB 1.x (DuckDB 2 ships no 3.10 wheels), so that run covers both DuckDB lines.
PY_OTHERS := 3.10 3.13
SUITE_DEPS := --all-extras --no-extra massgen --all-groups --no-group massgen-test --no-group genai-reference
# The other Pythons skip the Phoenix receiver (an interop test, run once on the default Python).
OTHER_DEPS := $(SUITE_DEPS) --no-group phoenix
DEMO_DIR ?= .mastrace-demo

.PHONY: demo test lint format bench clean browser js

.venv-bootstrap/bin/uv:
	$(PYTHON) -m venv .venv-bootstrap
	.venv-bootstrap/bin/pip install --quiet --disable-pip-version-check uv

# The demo needs only the core dependencies; the suite needs every extra and test group.
# A full environment (the suite's) holds the core: it is not synced down to the core's own resolution.
$(VENV)/.synced-core: pyproject.toml uv.lock | $(UV)
	@if [ $(VENV)/.synced -nt pyproject.toml ] && [ $(VENV)/.synced -nt uv.lock ]; then :; \
	else $(UV) sync --quiet --inexact --no-default-groups; fi
	touch $@

$(VENV)/.synced: pyproject.toml uv.lock | $(UV)
	$(UV) sync --quiet $(SUITE_DEPS)
	touch $@ $(VENV)/.synced-core

$(MG_VENV)/.synced: pyproject.toml uv.lock | $(UV)
	UV_PROJECT_ENVIRONMENT=$(MG_VENV) $(UV) sync --quiet --extra massgen --group massgen-test --no-default-groups
	touch $@

$(REF_VENV)/.synced: pyproject.toml uv.lock | $(UV)
	UV_PROJECT_ENVIRONMENT=$(REF_VENV) $(UV) sync --quiet --group genai-reference --no-default-groups --no-install-project
	touch $@

demo: $(VENV)/.synced-core
	MASTRACE_DIR=$(DEMO_DIR) $(PY) examples/coordination_demo.py --store $(DEMO_DIR) --report

browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  (apt-get update -qq && apt-get install -y -qq chromium >/dev/null) 2>&1 | tail -n 3 || \
	  echo "chromium could not be installed: browser tests will fail"; }

# The OpenTelemetry JS SDK and OTLP exporter, run by Node in the serve tests (from the npm registry).
JS_DIR := tests/serve/js
js:
	@command -v npm >/dev/null 2>&1 || { \
	  (apt-get update -qq && apt-get install -y -qq nodejs npm >/dev/null) 2>&1 | tail -n 3 || \
	  echo "npm could not be installed: the OpenTelemetry JS exporter tests will be skipped"; }
	@if command -v npm >/dev/null 2>&1 && [ ! -f $(JS_DIR)/node_modules/.package-lock.json ]; then \
	  (cd $(JS_DIR) && npm ci --no-audit --no-fund --loglevel=error); fi

test: $(VENV)/.synced $(MG_VENV)/.synced $(REF_VENV)/.synced browser js
	bash tests/suites.sh "$(UV)" "$(PY_OTHERS)" "$(OTHER_DEPS)"

lint: $(VENV)/.synced
	$(VENV)/bin/ruff format --check src tests tests_massgen examples benchmarks
	$(VENV)/bin/ruff check src tests tests_massgen examples benchmarks

format: $(VENV)/.synced
	$(VENV)/bin/ruff format src tests tests_massgen examples benchmarks
	$(VENV)/bin/ruff check --fix src tests tests_massgen examples benchmarks

bench: $(VENV)/.synced $(REF_VENV)/.synced
	$(PY) benchmarks/run_all.py

clean:
	rm -rf $(VENV) $(MG_VENV) $(REF_VENV) .venv-py310 .venv-py313 .venv-bootstrap $(DEMO_DIR) .mastrace $(JS_DIR)/node_modules
