#!/usr/bin/env bash
# Make PostgreSQL's server binaries available for the prediction-log tests on a fresh Debian
# machine (run as root). The tests start and stop their own throwaway cluster on 127.0.0.1
# (tests/monitoring/conftest.py: initdb into a temporary folder, pg_ctl as the postgres user),
# so this script only installs: nothing is started, printed or exported.
# apt-get runs only when the binaries are missing.
set -euo pipefail

have_binaries() {
    command -v initdb >/dev/null 2>&1 && command -v pg_ctl >/dev/null 2>&1 && return 0
    compgen -G "/usr/lib/postgresql/*/bin/initdb" >/dev/null && compgen -G "/usr/lib/postgresql/*/bin/pg_ctl" >/dev/null
}

if ! have_binaries; then
    if [[ "$(id -u)" != 0 ]]; then
        echo ".ci/postgres.sh: PostgreSQL binaries are missing and installing them needs root" >&2
        exit 1
    fi
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >/dev/null
    apt-get install -y -qq --no-install-recommends postgresql >/dev/null
    # The package may start a default cluster on 5432; the tests do not use it.
    have_binaries || { echo ".ci/postgres.sh: postgresql installed but initdb/pg_ctl not found" >&2; exit 1; }
fi
