# The README's two commands: `make demo` (the main job) and `make test` (the whole suite);
# `make test-fast` is the developers' loop (no server, no slow size).
# Both create or refresh the local virtual environment from constraints.txt first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test test-fast typecheck bench dist clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[test,distributed]'
	# A test-only peer whose package is named `calibration`, like ours: installed apart, its
	# one module loaded by path (tests/calibration/test_estimators.py).
	$(BIN)/python -m pip install --quiet --no-deps -c constraints.txt --target $(VENV)/peers/uncertainty-calibration \
		uncertainty-calibration
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/thermostat demo

# The PostgreSQL tests need the server binaries, the dashboard's tests Debian's chromium and
# prometheus: installed here when missing (as root; without root, the scripts say how, and those
# tests skip with that reason). The suite runs on TEST_WORKERS pytest-xdist workers (one per core
# of the 2-core machines), each test file on one worker: a module's servers start once, and
# tests in one file run in order. TEST_WORKERS=0 runs everything in one process.
TEST_WORKERS ?= 2
test: $(STAMP)
	bash .ci/postgres.sh
	bash .ci/browser-and-prometheus.sh
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile $(PYTEST_ARGS)

# The fast tier: every test that starts no server and is not slow (markers in pyproject.toml),
# under 3 minutes on 2 cores. The whole suite is still `make test`.
test-fast: $(STAMP)
	$(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile -m "not integration and not slow" $(PYTEST_ARGS)

typecheck: $(STAMP)
	$(BIN)/python -m mypy calibration monitoring flows

# The wheel, dist/thermostat-VERSION-py3-none-any.whl: every package and its data files, the
# dependencies declared. Built offline with the venv's pinned setuptools. Install it elsewhere with
#   pip install -c constraints.txt 'dist/thermostat-0.1.0-py3-none-any.whl[postgresql,distributed]'
dist: $(STAMP)
	rm -rf build dist/thermostat-*.whl
	$(BIN)/python -m pip wheel --quiet --no-deps --no-build-isolation --wheel-dir dist .

# Start-up, first fits and the demo's wall time, idle and with both cores busy (benchmarks/startup.py).
.PHONY: bench-startup
bench-startup: $(STAMP)
	$(BIN)/python -m benchmarks.startup $(BENCH_ARGS)

# The fit and the evaluation against the memory floor (issue 23), in one process; add
# BENCH_ARGS="--baseline main" for main's kernels beside this checkout's, "--threads 1" on a loaded machine.
.PHONY: bench-kernels
bench-kernels: $(STAMP)
	NUMBA_CACHE_DIR=$${NUMBA_CACHE_DIR:-$(CURDIR)/.thermostat/numba-cache} $(BIN)/python -m benchmarks.kernels $(BENCH_ARGS)

# Benchmarks run in their own environment (.venv-bench) with the `bench` extra's peers.
bench:
	bash benchmarks/run.sh

# The monitor's cost (issue 23): ingest rows/s, one check's reads per row and memory, a fleet of
# 200 versions checked in one run, bytes per logged row (SQLite and a throwaway PostgreSQL).
.PHONY: bench-monitor
bench-monitor: $(STAMP)
	$(BIN)/python -m benchmarks.monitor_cost $(BENCH_ARGS)

# Partitioned sets, local engine vs Dask (issue 13): generates 20M rows in a temp folder (~1.4 GB).
.PHONY: bench-partitioned
bench-partitioned: $(STAMP)
	$(BIN)/python -m benchmarks.partitioned $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .thermostat
