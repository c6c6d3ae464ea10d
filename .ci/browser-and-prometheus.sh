#!/usr/bin/env bash
# Make Debian's `chromium` (a real headless browser for the dashboard's page test, driven by
# the Python `playwright` package: no browser download) and `prometheus` (a real server that
# scrapes the dashboard's /metrics) available for tests/integration/test_dashboard.py.
# `make test` runs this before the suite. The tests start and stop their own processes on
# 127.0.0.1, so this script only installs: nothing is started or exported.
# apt-get runs only when a binary is missing, and only as root; without root it says how to
# install them and exits 0: those tests then skip with that reason (under CI=true they fail).
set -euo pipefail

missing=()
[[ -x /usr/bin/chromium ]] || missing+=(chromium)
command -v prometheus >/dev/null 2>&1 && command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
[[ ${#missing[@]} -eq 0 ]] && exit 0

if [[ "$(id -u)" != 0 ]]; then
    echo "browser-and-prometheus.sh: ${missing[*]} missing; the dashboard's browser/Prometheus tests will be skipped." >&2
    echo "browser-and-prometheus.sh: install once with: sudo apt-get install ${missing[*]}   (or: sudo bash .ci/browser-and-prometheus.sh)" >&2
    exit 0
fi
if ! command -v apt-get >/dev/null 2>&1; then
    echo "browser-and-prometheus.sh: ${missing[*]} missing and this is not a Debian-like system: install them with your package manager" >&2
    exit 0
fi
echo "browser-and-prometheus.sh: installing Debian's ${missing[*]} (for the dashboard's tests)..." >&2
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >/dev/null
apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
[[ -x /usr/bin/chromium ]] || { echo "browser-and-prometheus.sh: chromium installed but /usr/bin/chromium not found" >&2; exit 1; }
command -v prometheus >/dev/null 2>&1 || { echo "browser-and-prometheus.sh: prometheus installed but not on PATH" >&2; exit 1; }
