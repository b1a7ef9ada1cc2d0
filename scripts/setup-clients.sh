#!/usr/bin/env bash
# Install the Python agent frameworks the client tests drive (tests/test_agent_frameworks.py runs the scripts in
# tests/clients/ with this venv's Python): fastmcp, pydantic-ai (its slim package with the MCP extra),
# openai-agents and langchain-mcp-adapters, into their own venv at .cache/clients. They get a venv of their own, not
# the project's .venv, because their dependency pins are theirs and may clash with ours: the tests check the bridge
# against what a new user who installs these libraries from PyPI gets, not against our lock file.
#
# Reproducible: the libraries are pinned exactly and their dependencies are resolved as PyPI stood on
# $exclude_newer, so a later release of a transitive dependency cannot change what gets installed.
# Idempotent: when the venv already holds exactly this pin set, nothing is reinstalled.
# Quiet: one line on success, the installer's full output and a non-zero exit on any failure.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
venv="$root/.cache/clients"
stamp="$venv/.setup-clients.sha256"
pins=(fastmcp==4.2.3 "pydantic-ai-slim[mcp]==2.68.0" openai-agents==0.24.0 langchain-mcp-adapters==0.3.1)
exclude_newer="2026-11-24T00:00:00Z"
modules=(fastmcp pydantic_ai agents langchain_mcp_adapters)

die() {
    echo "setup-clients.sh: $*" >&2
    exit 1
}

# uv, found the way scripts/setup.sh finds (or installs) it.
if command -v uv >/dev/null 2>&1; then
    UV="$(command -v uv)"
elif [ -x "$root/.cache/uv/bin/uv" ]; then
    UV="$root/.cache/uv/bin/uv"
else
    die "uv is neither on PATH nor in .cache/uv; run scripts/setup.sh first"
fi
export UV_PYTHON_DOWNLOADS=never

# Debian's interpreter when there is one: world-readable and independent of anyone's pyenv; else what uv finds.
if [ -x /usr/bin/python3 ]; then python=(--python /usr/bin/python3); else python=(); fi

want="$(printf '%s\n' "${pins[@]}" "$exclude_newer" "${python[@]}" | sha256sum | cut -d' ' -f1)"
imports=()  # checked only after an install: importing all four takes seconds, and a finished venv does not change
if [ ! -x "$venv/bin/python" ] || [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    log="$(mktemp)"
    trap 'rm -f "$log"' EXIT
    if ! {
        "$UV" venv --quiet --clear "${python[@]}" "$venv" &&
            "$UV" pip install --quiet --python "$venv/bin/python" --exclude-newer "$exclude_newer" "${pins[@]}"
    } >"$log" 2>&1; then
        cat "$log" >&2
        die "installing ${pins[*]} into $venv failed (output above)"
    fi
    imports=("${modules[@]}")
fi

# Prove each library is installed at its pin before saying so, and after an install that each imports (an import
# pulls in the MCP SDK the library was resolved against, so a broken resolution shows here, not in a test).
versions="$("$venv/bin/python" - "${pins[@]}" -- "${imports[@]}" <<'EOF'
import importlib
import sys
from importlib.metadata import version

args = sys.argv[1:]
split = args.index("--")
found = []
for pin in args[:split]:
    name, _, wanted = pin.partition("==")
    name = name.split("[")[0]
    have = version(name)
    if have != wanted:
        sys.exit(f"{name} is {have}, expected {wanted}")
    found.append(f"{name} {have}")
for module in args[split + 1 :]:
    importlib.import_module(module)
found.append(f"mcp {version('mcp')}")
print(", ".join(found))
EOF
)" || die "the venv at $venv does not hold the pinned libraries: $versions"
echo "$want" >"$stamp"

echo "setup-clients.sh: .cache/clients has $versions (Python $("$venv/bin/python" -c 'import platform; print(platform.python_version())'))"
