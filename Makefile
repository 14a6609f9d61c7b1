# Quick start: `make demo` (one deliberation end to end) and `make test` (the suite).
# Both create .venv and install what they need; only python3 (3.11+) is required.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
DB := data/temporal.db

.PHONY: install browser demo test lint format server worker simulator codec-server web chaos eval bench clean

install: $(STAMP)

$(STAMP): requirements.txt requirements-dev.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check -r requirements-dev.txt
	touch $(STAMP)

# One deliberation with live progress; starts (and afterwards stops) whatever is missing.
demo: $(STAMP)
	$(BIN)/python demo.py

test: $(STAMP) browser
	$(BIN)/python -m pytest -q

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

# Ruff's checks and its formatting, as CI runs them; `make format` rewrites the files.
lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

format: $(STAMP)
	$(BIN)/ruff check --fix .
	$(BIN)/ruff format .

# The bundled dataset through the council (simulated models without an API key); a rerun
# resumes. Another dataset or options: make eval DATASET=my.jsonl EVAL_ARGS="--limit 10".
DATASET ?= datasets/arithmetic_logic.jsonl
eval: $(STAMP)
	$(BIN)/python -m evaluation.local $(DATASET) $(EVAL_ARGS)

# Keep the Temporal server and Web UI (http://localhost:8233) up to browse past runs.
server: $(STAMP)
	@mkdir -p data
	$(BIN)/temporal server start-dev --db-filename $(DB) --ui-disable-news-fetch --log-level warn \
		--dynamic-config-value system.enableActivityEagerExecution=true \
		$(if $(COUNCIL_CODEC_ENDPOINT),--ui-codec-endpoint $(COUNCIL_CODEC_ENDPOINT))

# Decrypts payloads for the Web UI and CLI (needs COUNCIL_PAYLOAD_KEY); with it, run
# `make server COUNCIL_CODEC_ENDPOINT=http://127.0.0.1:8081`. See docs/deployment.md.
codec-server: $(STAMP)
	$(BIN)/python -m app.codec_server --port 8081

worker: $(STAMP)
	$(BIN)/python worker.py

# The web page (http://127.0.0.1:8080 unless COUNCIL_WEB_HOST/COUNCIL_WEB_PORT say otherwise).
web: $(STAMP)
	$(BIN)/python -m web

simulator: $(STAMP)
	$(BIN)/python -m simulator --port 8800

# 30 deliberations under worker kills, a server restart and fault storms (a few minutes).
chaos: $(STAMP)
	$(BIN)/python -m bench.chaos

# Figures against bare Temporal and plain asyncio, written to bench/RESULTS.md (about 10
# minutes; starts its own server, simulator and workers). Development sizes, or a
# selection: make bench BENCH_ARGS=--quick, make bench BENCH_ARGS="--only throughput".
bench: $(STAMP)
	$(BIN)/python -m bench $(BENCH_ARGS)

clean:
	rm -rf $(VENV) data .pytest_cache .hypothesis
