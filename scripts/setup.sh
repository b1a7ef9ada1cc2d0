#!/usr/bin/env bash
# Installs everything mcp-codemode needs on a Debian/Ubuntu machine, idempotently:
# system packages (sandboxes, mmdebstrap/debootstrap, libseccomp), uv, the project's .venv, and the local
# sandbox image. Run as root or through sudo; every other script starts by calling this one.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi
# Steps that can take minutes say how long they took (on a starved CI machine the log shows where time went).
timed() { local started=$SECONDS; "$@"; echo "setup: $* took $((SECONDS - started)) s" | cut -c1-160; }

packages=(bubblewrap podman runc runsc catatonit uidmap debootstrap mmdebstrap libseccomp2 python3 python3-venv
          util-linux procps ca-certificates python3-matplotlib python3-pil shellcheck
          prometheus  # a real Prometheus (and promtool) for tests/telemetry, which scrapes a bridge
          chromium chromium-driver)  # a real browser for tests/console, driven by Selenium (no download at run time)
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
    # Debian's package starts a Prometheus service on :9090 where systemd runs; the tests start their own.
    if [[ " ${missing[*]} " == *" prometheus "* ]] && [ -d /run/systemd/system ]; then
        $SUDO systemctl disable --now prometheus.service >/dev/null 2>&1 || true
    fi
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
timed "$UV" sync --locked --quiet

# The test tools (Node clients and servers, the Python upstream servers, the agent frameworks) install in the
# background while the image is built below: each waits mostly on its registry or on the disk, and one after another
# they have taken 14 minutes of a CI run. Each prints one line when done, or its installer's output and an error.
background=()
for step in scripts/setup-node.sh scripts/setup-upstreams.sh scripts/setup-clients.sh; do
    timed "$step" &
    background+=("$!:$step")
done
wait_for_background() {
    local entry failed=()
    for entry in "${background[@]}"; do
        wait "${entry%%:*}" || failed+=("${entry#*:}")
    done
    if [ "${#failed[@]}" -gt 0 ]; then
        echo "setup: ${failed[*]} failed (its output is above); run it alone to see only its own" >&2
        exit 1
    fi
}

# The image tests (tests/cli/test_packages.py) build images of their own from a root filesystem tarball in .cache/.
# Bootstrapping Debian takes 4-7 minutes on a slow machine, so it is done once per machine, into the cache the
# product itself uses as root (/var/cache/mcp-codemode, where `sudo mcp-codemode image build` looks), and copied
# into each checkout from there. Delete that file to bootstrap again.
shared_cache=/var/cache/mcp-codemode
if [ ! -s .cache/rootfs-bookworm.tar ]; then
    if ! $SUDO test -s "$shared_cache/rootfs-bookworm.tar"; then
        $SUDO .venv/bin/mcp-codemode image build --rootfs-only --cache-dir "$shared_cache"
    fi
    mkdir -p .cache
    $SUDO cat "$shared_cache/rootfs-bookworm.tar" >.cache/rootfs-bookworm.tar.partial
    mv .cache/rootfs-bookworm.tar.partial .cache/rootfs-bookworm.tar
fi

# The podman/docker backends need an image; no registry is reachable, so it is built from that root filesystem.
timed $SUDO scripts/build-image.sh "${MCP_BRIDGE_IMAGE:-mcp-codemode-sandbox:bookworm}" podman
wait_for_background
