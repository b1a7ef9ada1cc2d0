#!/usr/bin/env bash
# The whole test suite: set up, lint, type-check, then pytest on the real backends.
# Under CI=true a backend that cannot run fails the suite instead of being skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
.venv/bin/ruff check src tests benchmarks scripts
.venv/bin/ruff format --check src tests benchmarks scripts
.venv/bin/mypy
# pytest exits 5 when it collected no test; set -e turns that (like any failure) into a failed run.
.venv/bin/pytest "$@"
