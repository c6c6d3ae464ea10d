#!/usr/bin/env bash
# `make bench`: create or refresh .venv-bench (the project, editable, plus the `bench`
# extra's peers: torch CPU, netcal, torchmetrics, relplot), then print the benchmark table.
# Shared packages are pinned by constraints.txt, so the bench venv computes with the same
# numpy/scipy/numba as the main one. Extra arguments go to `python -m benchmarks`.
set -euo pipefail
cd "$(dirname "$0")/.."

PYTHON="${PYTHON:-python3}"
VENV="${BENCH_VENV:-.venv-bench}"
STAMP="$VENV/.installed"

if [[ ! -f "$STAMP" || pyproject.toml -nt "$STAMP" || constraints.txt -nt "$STAMP" ]]; then
    "$PYTHON" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --upgrade pip
    # torch==2.13.0 resolves to the CPU wheel here (no CUDA wheels are pulled).
    "$VENV/bin/python" -m pip install --quiet -c constraints.txt -e '.[bench]'
    touch "$STAMP"
fi

# Numba's on-disk cache for the compiled kernels; kept out of the source tree.
export NUMBA_CACHE_DIR="${NUMBA_CACHE_DIR:-$PWD/.thermostat/numba-cache}"
exec "$VENV/bin/python" -m benchmarks "$@"
