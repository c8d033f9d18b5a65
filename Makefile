# Every target sets itself up from nothing: a fresh clone needs only `make chaos` or `make test`.
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
PYTEST_ARGS ?=
# make test's pytest workers: the Docker, chaos and local-cluster tests run in turn on one,
# the rest spread over all (tests/conftest.py)
TEST_WORKERS ?= 2

.PHONY: setup debootstrap chromium test lint chaos compare nightly mutants image sim sim-build checker-service bench bench-store bench-node bench-failover bench-checker bench-harness bench-nemesis reproduce soak clean

setup: $(STAMP)

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	$(PY) -m pip install --quiet -e '.[dev]'
	@touch $(STAMP)

# The base image is made with debootstrap (no container registry is reachable): install it
# when missing, unless BASE_IMAGE names another base.
debootstrap:
	@command -v debootstrap >/dev/null || [ -n "$(BASE_IMAGE)" ] || \
		{ echo "installing debootstrap (builds the base image)"; apt-get update -qq && apt-get install -y -qq debootstrap; }

# The browser tests (tests/browser) drive Debian's chromium headless: install it when missing.
chromium:
	@command -v chromium >/dev/null || \
		{ echo "installing chromium (the browser tests drive it headless)"; apt-get update -qq && apt-get install -y -qq chromium; }

lint: setup
	$(VENV)/bin/ruff check nodes harness nemesis checkers systems tests bench
	$(VENV)/bin/mypy

test: setup lint debootstrap chromium
	$(PY) -m pytest -n $(TEST_WORKERS) $(PYTEST_ARGS)

# The same seeded test against DLedger, SYNC_MASTER and ASYNC_MASTER, one table (see harness/sweeps/compare.py).
compare: setup debootstrap
	$(PY) -m harness compare --nodes 3 --time-limit 60 --nemesis isolate-lose,kill,pause,partition \
		--nemesis-interval 4 --nemesis-concurrency 1 --seed 7

# The nightly sweep (see harness/sweeps/matrix.py): simulator seeds drawn fresh, then fault families, modes,
# flush policies, sizes, the must-fail controls and a few seeded node bugs, within NIGHTLY_BUDGET
# minutes; writes results/nightly-<time>/ with junit.xml.
# NIGHTLY_HOSTS=hosts.toml runs it on the machines of that inventory instead of containers.
NIGHTLY_BUDGET ?= 45
NIGHTLY_HOSTS ?=
nightly: setup sim-build $(if $(NIGHTLY_HOSTS),,debootstrap)
	$(PY) -m harness nightly --budget-min $(NIGHTLY_BUDGET)$(if $(NIGHTLY_HOSTS), --hosts $(NIGHTLY_HOSTS))

# The catalogue of seeded node bugs (harness/mutants/): does the simulator catch each, does the
# default run within 3 seeds, does its nightly cell? Long (minutes per bug); writes
# results/mutants-<time>/table.md. MUTANTS="name ..." hunts only those.
MUTANTS ?=
mutants: setup debootstrap
	$(PY) -m harness mutants hunt $(MUTANTS)

image: setup debootstrap
	$(PY) -m harness image

chaos: setup debootstrap
	$(PY) -m harness run --nodes 5 --time-limit 60 --nemesis default

# The simulator compiled with mypyc (nodes/sim/compiled.py): built once per change of nodes/.
sim-build: setup
	$(PY) -m nodes build-sim

sim: setup sim-build
	$(PY) -m nodes simulate-many --budget 300 --json bench/results/sim.json

checker-service: setup
	$(PY) -m checkers serve

bench: bench-store bench-node bench-failover bench-checker bench-harness bench-nemesis

bench-store: setup
	$(PY) bench/store.py

bench-node: setup
	$(PY) bench/node.py

bench-failover: setup
	$(PY) bench/failover.py

bench-harness: setup debootstrap
	$(PY) bench/throughput.py

bench-checker: setup
	$(PY) bench/checker.py

bench-nemesis: setup debootstrap
	$(PY) bench/nemesis_bite.py

# Jepsen's NATS 2.12.1 finding and etcd's clean runs on 3 nodes, 5 seeds a row (bench/reproduce.py):
# one Markdown table beside Jepsen's figures, and bench/results/reproduce.json. Long (about 40 minutes).
reproduce: setup debootstrap
	$(PY) bench/reproduce.py --seeds 5

# An hour of `harness run` under faults, sampling the harness's and the nodes' resident memory (bench/soak.py).
soak: setup debootstrap
	$(PY) bench/soak.py

clean:
	-$(PY) -m harness clean
	rm -rf $(VENV) .pytest_cache .ruff_cache .mypy_cache .hypothesis build *.egg-info
	find . -name __pycache__ -type d -prune -exec rm -rf {} +
