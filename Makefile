# The README's two commands: `make demo` (the main job) and `make test` (the whole suite);
# `make test-fast` is the developers' loop (no server, no slow size).
# Both create or refresh the local virtual environment from constraints.txt first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
TORCH_STAMP := $(VENV)/.installed-torch
KERNELS_STAMP := $(VENV)/.compiled-kernels

.PHONY: demo test test-fast typecheck bench dist docs clean

$(STAMP): pyproject.toml constraints.txt setup.py calibration/_kernels_numba.py calibration/_native.py
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt --build-constraint constraints.txt -e '.[test,distributed,docs]'
	# A test-only peer whose package is named `calibration`, like ours: installed apart, its
	# one module loaded by path (tests/calibration/test_estimators.py).
	$(BIN)/python -m pip install --quiet --no-deps -c constraints.txt --target $(VENV)/peers/uncertainty-calibration \
		uncertainty-calibration
	touch $(STAMP)

# The install above also compiles the numeric kernels ahead of time (setup.py: calibration/_kernels_native,
# a few seconds), in pip's build environment with the pinned numba (--build-constraint). Here numba's
# own compilation of them (1-3 minutes of one core; numba caches them beside the package), before
# the tests, which hold both to the same reference: no test waits.
$(KERNELS_STAMP): $(STAMP)
	$(BIN)/python -c "import calibration; calibration.compile_kernels()"
	touch $(KERNELS_STAMP)

# torch (CPU build) for the serving tests of a PyTorch checkpoint: `make test` only, never `make demo`.
$(TORCH_STAMP): $(STAMP)
	$(BIN)/python -m pip install --quiet -c constraints.txt --build-constraint constraints.txt -e '.[torch]'
	touch $(TORCH_STAMP)

demo: $(STAMP)
	$(BIN)/thermostat demo

# The PostgreSQL tests need the server binaries, the dashboard's tests Debian's chromium and
# prometheus: installed here when missing (as root; without root, the scripts say how, and those
# tests skip with that reason). The suite runs on TEST_WORKERS pytest-xdist workers (one per core
# of the 2-core machines), each test file on one worker: a module's servers start once, and
# tests in one file run in order. The files are handed out in collection order, the slow and
# integration files first (tests/conftest.py), so no file of minutes starts last.
# TEST_WORKERS=0 runs everything in one process.
TEST_WORKERS ?= 2
PYTEST_XDIST := -n $(TEST_WORKERS) --dist loadfile --no-loadscope-reorder
test: $(STAMP) $(TORCH_STAMP) $(KERNELS_STAMP)
	bash .ci/postgres.sh
	bash .ci/browser-and-prometheus.sh
	$(BIN)/python -m pytest $(PYTEST_XDIST) $(PYTEST_ARGS)

# The fast tier: every test that starts no server and is not slow (markers in pyproject.toml),
# under 3 minutes on 2 cores. The whole suite is still `make test`.
test-fast: $(STAMP) $(KERNELS_STAMP)
	$(BIN)/python -m pytest $(PYTEST_XDIST) -m "not integration and not slow" $(PYTEST_ARGS)

typecheck: $(STAMP)
	$(BIN)/python -m mypy calibration monitoring flows thermostat docsite

# The documentation site into site/ (open site/index.html; it works offline): MkDocs with Material,
# the reference pages generated from the code (docsite/). `make test` builds it with --strict too
# (tests/test_docs_site.py): a broken link or anchor, a page missing from the navigation or an
# unresolved API reference fails.
docs: $(STAMP)
	NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict

# The wheel, dist/thermostat-VERSION-cp311-cp311-linux_x86_64.whl: every package and its data files, the
# dependencies declared, the kernels compiled for this machine's CPU. Built offline with the venv's
# pinned setuptools and numba. Install it on this kind of machine with
#   pip install -c constraints.txt "$(ls dist/thermostat-*.whl)[postgresql,distributed]"
dist: $(STAMP)
	rm -rf build dist/thermostat-*.whl
	$(BIN)/python -m pip wheel --quiet --no-deps --no-build-isolation --wheel-dir dist .

# Start-up, first fits and the demo's wall time, idle and with both cores busy (benchmarks/startup.py).
.PHONY: bench-startup
bench-startup: $(STAMP)
	$(BIN)/python -m benchmarks.startup $(BENCH_ARGS)

# The fit and the evaluation against the memory floor, in one process, then the fit
# from a fresh installation (empty numba caches; a few minutes of one core compiling); add
# BENCH_ARGS="--baseline main" for main's kernels beside this checkout's, "--threads 1" on a loaded machine.
.PHONY: bench-kernels
bench-kernels: $(STAMP)
	$(BIN)/python -m benchmarks.kernels $(BENCH_ARGS)

# Benchmarks run in their own environment (.venv-bench) with the `bench` extra's peers.
bench:
	bash benchmarks/run.sh

# The monitor's cost: ingest rows/s, one check's reads per row and memory, a fleet of
# 200 versions checked in one run, bytes per logged row (SQLite and a throwaway PostgreSQL).
.PHONY: bench-monitor
bench-monitor: $(STAMP)
	$(BIN)/python -m benchmarks.monitor_cost $(BENCH_ARGS)

# Ingest at production rates: the ingestion service (batched; single rows under a bounded locust run)
# against log_predictions and a plain COPY of the same rows, on a throwaway PostgreSQL (benchmarks/ingest.py).
.PHONY: bench-ingest
bench-ingest: $(STAMP)
	$(BIN)/python -m pip install --quiet -c constraints.txt --build-constraint constraints.txt -e '.[load]'
	$(BIN)/python -m benchmarks.ingest $(BENCH_ARGS)

# Partitioned sets, local engine vs Dask: generates 20M rows in a temp folder (~1.4 GB).
.PHONY: bench-partitioned
bench-partitioned: $(STAMP)
	$(BIN)/python -m benchmarks.partitioned $(BENCH_ARGS)

clean:
	rm -rf $(VENV) .thermostat
