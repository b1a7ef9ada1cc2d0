#!/usr/bin/env bash
# Install the real Python MCP servers the hub tests drive (tests/upstream/test_hub.py through tests/support/upstreams.py):
# mcp-server-time, mcp-server-git and mcp-server-fetch, into their own venv at .cache/upstreams. They get a venv of
# their own, not the project's .venv, because their dependency pins are theirs and may clash with ours; the tests
# start them by the venv's entry points (never uvx, which leaves its own process tree behind).
#
# Reproducible: the servers are pinned exactly and their dependencies are resolved as PyPI stood on
# $exclude_newer, so a later release of a transitive dependency cannot change what gets installed.
# Idempotent: when the venv already holds exactly this pin set, nothing is reinstalled.
# Quiet: one line on success, the installer's full output and a non-zero exit on any failure.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.cache/upstreams"
stamp="$venv/.setup-upstreams.sha256"
pins=(mcp-server-time==2026.10.19 mcp-server-git==2026.10.19 mcp-server-fetch==2026.10.24)
exclude_newer="2026-11-01T00:00:00Z"
entry_points=(mcp-server-time mcp-server-git mcp-server-fetch)

die() {
    echo "setup-upstreams.sh: $*" >&2
    exit 1
}

if [ "$(id -u)" -eq 0 ]; then SUDO=""; else SUDO="sudo"; fi

# mcp-server-git drives the git binary (through GitPython); the tests also make repositories with it.
if ! command -v git >/dev/null 2>&1; then
    echo "setup-upstreams.sh: installing git"
    $SUDO apt-get update -q
    $SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends git
fi

# uv, found the way scripts/setup.sh finds (or installs) it; $python picks Debian's interpreter.
# shellcheck source=scripts/find-uv.sh
source "$root/scripts/find-uv.sh"

want="$(printf '%s\n' "${pins[@]}" "$exclude_newer" "${python[@]}" | sha256sum | cut -d' ' -f1)"
current=1
for entry in "${entry_points[@]}"; do [ -x "$venv/bin/$entry" ] || current=0; done
if [ "$current" -eq 0 ] || [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    log="$(mktemp)"
    trap 'rm -f "$log"' EXIT
    if ! {
        "$UV" venv --quiet --clear "${python[@]}" "$venv" &&
            "$UV" pip install --quiet --python "$venv/bin/python" --exclude-newer "$exclude_newer" "${pins[@]}"
    } >"$log" 2>&1; then
        cat "$log" >&2
        die "installing ${pins[*]} into $venv failed (output above)"
    fi
fi

# Prove each server is installed at its pin and its entry point is there before saying so.
for entry in "${entry_points[@]}"; do
    [ -x "$venv/bin/$entry" ] || die "no entry point $venv/bin/$entry after install"
done
versions="$("$venv/bin/python" - "${pins[@]}" <<'EOF'
import sys
from importlib.metadata import version

found = []
for pin in sys.argv[1:]:
    name, _, wanted = pin.partition("==")
    have = version(name)
    if have != wanted:
        sys.exit(f"{name} is {have}, expected {wanted}")
    found.append(f"{name} {have}")
print(", ".join(found))
EOF
)" || die "the venv at $venv does not hold the pinned servers: $versions"
echo "$want" >"$stamp"

echo "setup-upstreams.sh: .cache/upstreams has $versions (Python $("$venv/bin/python" -c 'import platform; print(platform.python_version())'))"
