# Every target sets itself up from nothing: a fresh clone needs only `make chaos` or `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=

.PHONY: setup test lint chaos image sim bench bench-store bench-node bench-failover bench-checker clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

lint: setup
	$(VENV)/bin/ruff check nodes harness nemesis checkers tests bench

test: setup lint
	$(PY) -m pytest $(PYTEST_ARGS)

image: setup
	$(PY) -m harness image

chaos: setup
	$(PY) -m harness run --nodes 5 --time-limit 60 --nemesis kill,partition

sim: setup
	$(PY) -m nodes simulate-many --budget 300

bench: bench-store bench-node bench-failover bench-checker

bench-store: setup
	$(PY) bench/store.py

bench-node: setup
	$(PY) bench/node.py

bench-failover: setup
	$(PY) bench/failover.py

bench-checker: setup
	$(PY) bench/checker.py

clean:
	-$(PY) -m harness clean
	rm -rf $(VENV) .pytest_cache .ruff_cache .hypothesis build *.egg-info
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
