#!/usr/bin/env bash
# Installs everything mcp-codemode needs on a Debian/Ubuntu machine, idempotently:
# system packages (sandboxes, mmdebstrap/debootstrap, libseccomp), uv, the project's .venv, and the local
# sandbox image. Run as root or through sudo; every other script starts by calling this one.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi

packages=(bubblewrap podman runc runsc catatonit uidmap debootstrap mmdebstrap libseccomp2 python3 python3-venv
          util-linux procps ca-certificates python3-matplotlib python3-pil shellcheck)
# npm fetches the Node test clients (MCP Inspector, the conformance suite, a Node 22 binary); any Node will do.
command -v npm >/dev/null 2>&1 || packages+=(nodejs npm)
missing=()
for pkg in "${packages[@]}"; do
    dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" || missing+=("$pkg")
done
if [ "${#missing[@]}" -gt 0 ]; then
    echo "setup: installing ${missing[*]}"
    $SUDO apt-get update -q
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

# uv from PyPI (the only Python package index we can rely on), in a private venv when it is not on PATH.
if command -v uv >/dev/null 2>&1; then
    UV="$(command -v uv)"
else
    UV=".cache/uv/bin/uv"
    if [ ! -x "$UV" ]; then
        echo "setup: installing uv into .cache/uv"
        /usr/bin/python3 -m venv .cache/uv
        .cache/uv/bin/pip install -q uv
    fi
fi
export UV_PYTHON_DOWNLOADS=never
"$UV" sync --locked --quiet
scripts/setup-node.sh
scripts/setup-upstreams.sh
scripts/setup-clients.sh

# The podman/docker backends need an image; no registry is reachable, so it is built from Debian.
$SUDO scripts/build-image.sh "${MCP_BRIDGE_IMAGE:-mcp-codemode-sandbox:bookworm}" podman
# The image tests (tests/cli/test_packages.py) build images of their own from the cached root filesystem in .cache/;
# a checkout on a machine that already has the image has none yet (mmdebstrap as root: about 15 s).
if [ ! -s .cache/rootfs-bookworm.tar ]; then
    $SUDO .venv/bin/mcp-codemode image build --rootfs-only --cache-dir .cache
fi
