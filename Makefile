# The README's two commands: `make demo` (the main job) and `make test` (the whole suite).
# Both create or refresh the local virtual environment from constraints.txt first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test typecheck bench clean

$(STAMP): pyproject.toml constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -c constraints.txt -e '.[test]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/thermostat demo

# The PostgreSQL tests need the server binaries: installed here when missing (as root; without
# root, .ci/postgres.sh says how, and those tests skip with that reason).
test: $(STAMP)
	bash .ci/postgres.sh
	$(BIN)/python -m pytest $(PYTEST_ARGS)

typecheck: $(STAMP)
	$(BIN)/python -m mypy calibration monitoring flows

# Benchmarks run in their own environment (.venv-bench) with the `bench` extra's peers.
bench:
	bash benchmarks/run.sh

clean:
	rm -rf $(VENV) .thermostat
