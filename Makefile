# The README's two promises: `make run` runs the system, `make test` runs the tests.
# Both create .venv/ and install the project into it first (once, and again whenever
# pyproject.toml changes). Both need Node >= 20: both install the inbox page's browser
# libraries into gateway/web/ (the gateway serves them at /inbox), and `make test` also
# installs the official AG-UI client into tests/node/ (each again whenever its lock file
# changes).

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed
NODE_INSTALLED := tests/node/node_modules/.installed
WEB_INSTALLED := gateway/web/node_modules/.installed

.PHONY: run test unit install bench bench-waiting bench-soak bench-pair bench-peer lint histories screenshots

install: $(INSTALLED) $(NODE_INSTALLED) $(WEB_INSTALLED)

$(INSTALLED): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[test]'
	touch $(INSTALLED)

# The official AG-UI TypeScript client, which the end-to-end tests drive the gateway with.
$(NODE_INSTALLED): tests/node/package-lock.json
	npm ci --prefix tests/node --no-audit --no-fund --silent
	touch $(NODE_INSTALLED)

# The inbox page's browser libraries (json-editor), pinned by the lock file; the gateway
# serves an allowlist of their files, so nothing loads from a CDN.
$(WEB_INSTALLED): gateway/web/package-lock.json
	npm ci --prefix gateway/web --no-audit --no-fund --silent
	touch $(WEB_INSTALLED)

run: $(INSTALLED) $(WEB_INSTALLED)
	$(BIN)/python scripts/run.py

# Debian's Chromium, which the inbox page's browser tests drive.
CHROMIUM := /usr/bin/chromium
$(CHROMIUM):
	scripts/install-chromium

# The suite waits on servers and timers far more than it computes, so it runs on TEST_WORKERS
# processes (pytest-xdist), each with its own dev server and browser; TEST_WORKERS=0 runs
# it in this one. A worker that runs out of tests takes some of another's (worksteal):
# a few tests take a minute where most take a second, and xdist's default hands out its
# last tests in chunks, which left one worker idle for minutes while the other ran on.
TEST_WORKERS ?= 2
test: $(INSTALLED) $(NODE_INSTALLED) $(WEB_INSTALLED) $(CHROMIUM)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist worksteal

# The inbox page's screenshots in docs/, taken by its browser tests.
screenshots: $(INSTALLED) $(WEB_INSTALLED) $(CHROMIUM)
	AGUI_SCREENSHOTS=docs $(BIN)/python -m pytest tests/test_inbox_page.py -q

# The unit tier alone: no Temporal server, no network, seconds.
unit: $(INSTALLED)
	$(BIN)/python -m pytest tests/unit -q

# All scenarios, every file replaced; ONLY="scenario ...": those alone.
histories: $(INSTALLED)
	$(BIN)/python -m tests.record_histories $(ONLY)

# CODEC=on or CODEC=off: payloads encrypted with a fresh key, or not; unset, as
# AGUI_PAYLOAD_KEYS says (docs/bench.md, "Encryption"). VERSIONING=off: the worker
# unversioned, not a build of a Worker Deployment as in make run (docs/bench.md, "Worker
# Versioning").
bench: $(INSTALLED)
	$(BIN)/python -m bench $(if $(CODEC),--codec $(CODEC)) $(if $(VERSIONING),--versioning $(VERSIONING))

# Many threads waiting on interrupts (docs/bench.md, "Waiting threads"): the worker's
# memory and the inbox's latency; THREADS=n for another count than 100,000. Long: ~40 min
# for 100,000 on a 2-core machine. Not part of `make test` or `make bench`.
bench-waiting: $(INSTALLED)
	$(BIN)/python -m bench.waiting $(if $(THREADS),--threads $(THREADS))

# Interrupt cycles without pause, each process's memory read as they go (docs/bench.md,
# "Memory under a long load"); MINUTES=n for another length than 45. Not part of
# `make test` or `make bench`.
bench-soak: $(INSTALLED)
	$(BIN)/python -m bench.soak $(if $(MINUTES),--minutes $(MINUTES))

# Two builds at once, each as make run runs it, the cycles alternating between them
# (docs/bench.md, "Two builds in pairs"): A=ref B=ref (default HEAD for both),
# ARGS="--b-env GOGC=400" for the rest; ARGS="--turns 200": one conversation each
# instead of fresh threads. ~1.5 minutes.
bench-pair: $(INSTALLED)
	$(BIN)/python -m bench.pair $(if $(A),--a $(A)) $(if $(B),--b $(B)) $(ARGS)

# One side-by-side sitting: ../shared/peers/side_by_side.sh (the peer, then make run), then
# the cycle's floor with the same client, the three in one table (docs/bench.md, "The floor
# against the peer"). Needs ports 7233, 8233, 8000 and 8100 free; ARGS="--fresh" deletes
# .data first, ARGS="--duration 5 --warmup 2" for a quicker one. ~5 minutes.
bench-peer: $(INSTALLED)
	$(BIN)/python -m bench.sitting $(ARGS)

lint: $(INSTALLED)
	$(BIN)/python -m pip install --quiet ruff==0.17.6 mypy==2.4.1
	$(BIN)/ruff check . && $(BIN)/ruff format --check . && $(BIN)/mypy workflows activities gateway bench worker.py settings.py logs.py tracing.py codec.py
