# Two commands for a newcomer: `make standalone` runs Sluice, `make test` runs the tests.
# Both first install the system packages this machine lacks (scripts/install-system-packages.sh:
# apt-get, through sudo when not root; nothing when all is there), then create the virtual
# environment in .venv with the exact versions of constraints.txt. `make test` also installs
# the npm packages of tests/node (the WebSocket API's Node.js client test) from its
# package-lock.json; both stay, so later runs need no network.

PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
NODE_DIR   := tests/node
NODE_STAMP := $(NODE_DIR)/node_modules/.installed
PIP_VERSION := 26.3
UV_VERSION  := 0.13.9

.PHONY: system standalone test lint format bench bench-smoke lock dist clean

system:
	@PYTHON=$(PYTHON) bash scripts/install-system-packages.sh

# The client (client/pyproject.toml, the sluice package) and the server (pyproject.toml, which
# depends on it) are two distributions; both are installed editable from this checkout.
$(STAMP): pyproject.toml client/pyproject.toml constraints.txt | system
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --disable-pip-version-check pip==$(PIP_VERSION)
	$(BIN)/python -m pip install --quiet --constraint constraints.txt \
		-e ./client -e '.[server,reports,dev]'
	touch $(STAMP)

# npm ci removes node_modules and installs exactly the lock file's versions.
$(NODE_STAMP): $(NODE_DIR)/package.json $(NODE_DIR)/package-lock.json | system
	cd $(NODE_DIR) && npm ci --no-audit --no-fund
	touch $(NODE_STAMP)

standalone: system $(STAMP)
	@echo "Sluice standalone: admin API on http://localhost:8080, Redis on port 6650;"
	@echo "it runs in this terminal until Ctrl-C. In a second terminal: source .venv/bin/activate"
	$(BIN)/sluice standalone

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/mypy
	$(BIN)/lint-imports

test: system $(STAMP) $(NODE_STAMP) lint
	$(BIN)/python -m pytest -n 2 --dist loadfile --durations=25

bench: $(STAMP)
	$(BIN)/python -m bench.run_all

bench-smoke: $(STAMP)
	$(BIN)/python -m bench.run_all --quick --output bench-smoke.md

format: $(STAMP)
	$(BIN)/ruff format .
	$(BIN)/ruff check --fix .

# Re-resolve every dependency (server, reports and dev extras included) into constraints.txt, for
# Python 3.11 and newer; commit the result.
lock: $(STAMP)
	$(BIN)/python -m pip install --quiet uv==$(UV_VERSION)
	$(BIN)/uv pip compile pyproject.toml --extra server --extra reports --extra dev --universal \
		--python-version 3.11 --custom-compile-command "make lock" --no-emit-package sluice-client \
		--quiet -o constraints.txt

# The two wheels into dist/: sluice_client (only the sluice package) and sluice_dispatch (the
# server, which requires it), built offline with the environment's setuptools.
dist: $(STAMP)
	rm -rf dist build client/build
	$(BIN)/python -m pip wheel --quiet --no-deps --no-build-isolation --wheel-dir dist ./client .

clean:
	rm -rf $(VENV) $(NODE_DIR)/node_modules data .pytest_cache .ruff_cache
