# The README's two promises: `make run` runs the system, `make test` runs the tests.
# Both create .venv/ and install the project into it first (once, and again whenever
# pyproject.toml changes). Only `make test` needs Node >= 20: it also installs the official
# AG-UI client into tests/node/ (again whenever its lock file changes).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
NODE_INSTALLED := tests/node/node_modules/.installed

.PHONY: run test unit install bench lint histories

install: $(INSTALLED) $(NODE_INSTALLED)

$(INSTALLED): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(INSTALLED)

# The official AG-UI TypeScript client, which the end-to-end tests drive the gateway with.
$(NODE_INSTALLED): tests/node/package-lock.json
	npm ci --prefix tests/node --no-audit --no-fund --silent
	touch $(NODE_INSTALLED)

run: $(INSTALLED)
	$(BIN)/python scripts/run.py

# Debian's Chromium, which the inbox page's browser tests drive.
CHROMIUM := /usr/bin/chromium
$(CHROMIUM):
	scripts/install-chromium

test: $(INSTALLED) $(NODE_INSTALLED) $(CHROMIUM)
	$(BIN)/python -m pytest

# The unit tier alone: no Temporal server, no network, seconds.
unit: $(INSTALLED)
	$(BIN)/python -m pytest tests/unit -q

histories: $(INSTALLED)
	$(BIN)/python -m tests.record_histories

bench: $(INSTALLED)
	$(BIN)/python -m bench

lint: $(INSTALLED)
	$(BIN)/python -m pip install --quiet ruff==0.17.6 mypy==2.4.1
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/mypy workflows activities gateway bench worker.py settings.py logs.py tracing.py
