# Two commands for a newcomer: `make standalone` runs Sluice, `make test` runs the tests.
# Both create the virtual environment in .venv on first use.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: standalone test lint format bench bench-smoke clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e '.[reports,dev]'
	touch $(STAMP)

standalone: $(STAMP)
	$(BIN)/sluice standalone

lint: $(STAMP)
	$(BIN)/ruff check .

test: $(STAMP) lint
	$(BIN)/python -m pytest -n 2 --dist loadfile

bench: $(STAMP)
	$(BIN)/python -m bench.run_all

bench-smoke: $(STAMP)
	$(BIN)/python -m bench.run_all --quick --output bench-smoke.md

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

clean:
	rm -rf $(VENV) data .pytest_cache .ruff_cache
