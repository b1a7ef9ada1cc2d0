#!/usr/bin/env bash
# The whole test suite: set up, lint, type-check, then pytest on the real backends.
# Under CI=true a backend that cannot run fails the suite instead of being skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
# Every test starts Python processes (the bridge, the agent clients, upstream servers) that import the same few
# hundred modules; with PYTHONDONTWRITEBYTECODE set (some CI images set it) each of them compiles those again.
unset PYTHONDONTWRITEBYTECODE
# Each step says how long it took, so a slow CI run's log shows where its minutes went.
timed() { local started=$SECONDS; "$@"; echo "test.sh: $(basename "$1") took $((SECONDS - started)) s"; }
timed scripts/setup.sh
timed .venv/bin/ruff check src tests benchmarks scripts
timed .venv/bin/ruff format --check src tests benchmarks scripts
# mypy's cache is kept per machine, outside the checkout: a cold run takes minutes on a slow machine, and the cache
# is checked against each file's hash, so a stale entry is never trusted.
timed .venv/bin/mypy --cache-dir "${XDG_CACHE_HOME:-$HOME/.cache}/mcp-codemode/mypy"
# pytest exits 5 when it collected no test; set -e turns that (like any failure) into a failed run.
# --durations names the slowest tests in every run's log, so a slow CI run says where its time went.
# Three pytest processes (pytest-xdist), each taking whole groups: a test file (its module fixtures are built once,
# its tests run in order), or one backend's share of a file that shares nothing else between its tests (the groups
# are made in tests/conftest.py). Most of a test's time is spent waiting on processes it started, and on the
# CPU-starved VMs CI runs on, three at once got through about twice the work of one (README, Development).
# PYTEST_WORKERS=0 runs everything in this one process; arguments after `make test` (or this script) go to pytest
# and win over these.
.venv/bin/pytest -n "${PYTEST_WORKERS:-3}" --dist loadgroup --durations=25 "$@"
