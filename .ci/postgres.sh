#!/usr/bin/env bash
# Make PostgreSQL's server binaries available for the prediction-log tests (Debian). `make test`
# runs this before the suite. The tests start and stop their own throwaway cluster on 127.0.0.1
# (tests/monitoring/conftest.py: initdb into a temporary folder, pg_ctl as the postgres user),
# so this script only installs: nothing is started or exported.
# apt-get runs only when the binaries are missing, and only as root; without root it says how
# to install them and exits 0: the PostgreSQL tests then skip with that reason (under CI=true
# they fail instead).
set -euo pipefail

have_binaries() {
    command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1 && return 0
    compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null && compgen -G "/usr/lib/postgresql/*/bin/pg_ctl" >/dev/null
}

have_binaries && exit 0
if [[ "$(id -u)" != 0 ]]; then
    echo "postgres.sh: PostgreSQL binaries (initdb, pg_ctl) are missing; the PostgreSQL tests will be skipped." >&2
    echo "postgres.sh: install them once with: sudo apt-get install postgresql   (or: sudo bash .ci/postgres.sh)" >&2
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "postgres.sh: PostgreSQL binaries are missing and this is not a Debian-like system: install PostgreSQL's server package" >&2
    exit 0
fi
echo "postgres.sh: installing Debian's postgresql (server binaries for the tests' throwaway cluster)..." >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends postgresql >/dev/null
# The package may start a default cluster on 5432; the tests do not use it.
have_binaries || { echo "postgres.sh: postgresql installed but initdb/pg_ctl not found" >&2; exit 1; }
