#!/usr/bin/env bash
# Builds the local sandbox image for the podman/docker backends.
#
# No container registry is reachable on our machines, so the image is made from Debian's
# packages: debootstrap a minimal bookworm with python3, strip what a sandbox never needs,
# and `podman import` the tree. The rootfs tarball is cached so a later rebuild (for
# example after `podman system reset`) takes seconds instead of a minute.
#
# Usage: scripts/build-image.sh [IMAGE] [RUNTIME]   (defaults: mcp-codemode-sandbox:bookworm podman)
set -euo pipefail

image="${1:-mcp-codemode-sandbox:bookworm}"
runtime="${2:-podman}"
suite="${MCP_CODEMODE_IMAGE_SUITE:-bookworm}"
mirror="${MCP_CODEMODE_IMAGE_MIRROR:-http://deb.debian.org/debian}"
cache_dir="${MCP_CODEMODE_CACHE_DIR:-$(cd "$(dirname "$0")/.." && pwd)/.cache}"
tarball="$cache_dir/rootfs-$suite.tar"

if "$runtime" image inspect "$image" >/dev/null 2>&1; then
    echo "build-image: $image already present in $runtime"
    exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
    echo "build-image: debootstrap needs root; run: sudo $0 $*" >&2
    exit 1
fi

if [ ! -s "$tarball" ]; then
    command -v debootstrap >/dev/null || { echo "build-image: install debootstrap (apt-get install debootstrap)" >&2; exit 1; }
    mkdir -p "$cache_dir"
    root="$(mktemp -d "$cache_dir/rootfs.XXXXXX")"
    trap 'rm -rf "$root"' EXIT
    echo "build-image: debootstrap $suite into $root (about a minute)"
    debootstrap --variant=minbase --include=python3 "$suite" "$root" "$mirror" >"$cache_dir/debootstrap.log" 2>&1 || {
        echo "build-image: debootstrap failed; last lines of $cache_dir/debootstrap.log:" >&2
        tail -n 20 "$cache_dir/debootstrap.log" >&2
        exit 1
    }
    # A sandbox has no use for package caches, docs or apt state; dropping them halves the image.
    rm -rf "$root"/var/cache/apt/* "$root"/var/lib/apt/lists/* "$root"/usr/share/doc/* \
           "$root"/usr/share/man/* "$root"/usr/share/locale/* "$root"/var/log/*
    mkdir -p "$root/workspace"
    chmod 1777 "$root/workspace"
    tar -C "$root" -cf "$tarball.tmp" .
    mv "$tarball.tmp" "$tarball"
fi

echo "build-image: importing $tarball as $image"
"$runtime" import --change 'CMD ["/usr/bin/python3"]' --change 'WORKDIR /workspace' "$tarball" "$image" >/dev/null
echo "build-image: $image ready"
