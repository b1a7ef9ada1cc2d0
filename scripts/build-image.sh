#!/usr/bin/env bash
# Builds the local sandbox image for the podman/docker backends.
#
# A thin wrapper: the one implementation is the package's own `mcp-codemode image build` (see docs/sandbox.md,
# "The local image"), which an installed wheel has too. This keeps the repository's historical command line and
# its cache in the repository's .cache/ (the rootfs tarball there makes a rebuild take seconds).
#
# Usage: scripts/build-image.sh [IMAGE] [RUNTIME]   (defaults: mcp-codemode-sandbox:bookworm podman)
set -euo pipefail

repo="$(cd "$(dirname "$0")/.." && pwd)"
python="$repo/.venv/bin/python"
if [ ! -x "$python" ]; then
    echo "build-image: $python is missing; run scripts/setup.sh first (or use an installed mcp-codemode:" \
         "mcp-codemode image build)" >&2
    exit 1
fi
exec "$python" -m mcp_codemode image build --tag "${1:-mcp-codemode-sandbox:bookworm}" --engine "${2:-podman}" \
    --cache-dir "${MCP_CODEMODE_CACHE_DIR:-$repo/.cache}"
