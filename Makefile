# Two commands for a fresh machine: `make run` and `make test`.
PY      ?= python3
VENV    := .venv
BIN     := $(VENV)/bin
STAMPS  := .make-stamps
export HF_HUB_OFFLINE := 1

.PHONY: run test test-fast lint install install-dev browser clean

# The UI on :8501 and, beside it, the HTTP API on :8000 (/docs); `workbench serve --no-api` for the UI alone.
run: $(STAMPS)/install
	$(BIN)/workbench serve

test: $(STAMPS)/install-dev $(STAMPS)/browser
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python -m pytest

# The quick loop: everything but the tests marked slow (SQuAD-scale, browser, pipeline quality).
test-fast: $(STAMPS)/install-dev
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports
	$(BIN)/python -m pytest -m "not slow"

lint: $(STAMPS)/install-dev
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# torch first, pinned: it picks the local CPU build; anything unpinned would pull CUDA.
$(STAMPS)/torch: $(BIN)/python
	$(BIN)/pip install --quiet torch==2.13.0
	@mkdir -p $(STAMPS) && touch $@

# The embedded server's pgvector is rebuilt for a CPU without AVX-512, which the wheel's build needs.
$(STAMPS)/install: $(STAMPS)/torch pyproject.toml
	$(BIN)/pip install --quiet -e .
	deploy/portable-pgvector.sh $(BIN)/python
	@mkdir -p $(STAMPS) && touch $@

$(STAMPS)/install-dev: $(STAMPS)/torch pyproject.toml
	$(BIN)/pip install --quiet -e '.[dev]'
	deploy/portable-pgvector.sh $(BIN)/python
	@mkdir -p $(STAMPS) && touch $@ $(STAMPS)/install

# Browser tests drive the system Chromium; they skip, saying why, if it cannot be installed.
$(STAMPS)/browser:
	@command -v chromium >/dev/null 2>&1 || { \
	  if [ "$$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq chromium >/dev/null; \
	  else sudo -n apt-get update -qq && sudo -n apt-get install -y -qq chromium >/dev/null; fi; } \
	  || echo "chromium could not be installed: browser tests will be skipped"
	@mkdir -p $(STAMPS) && touch $@

clean:
	rm -rf $(VENV) $(STAMPS)
