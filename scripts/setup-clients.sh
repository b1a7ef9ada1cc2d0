#!/usr/bin/env bash
# Install the Python agent frameworks the client tests drive (tests/face/test_agent_frameworks.py runs the scripts in
# tests/clients/ with these venvs' Python): fastmcp, pydantic-ai (its slim package with the MCP extra) and
# openai-agents into .cache/clients, langchain-mcp-adapters into .cache/clients-langchain. They get venvs of their
# own, not the project's .venv, because their dependency pins are theirs and may clash with ours: the tests check the
# bridge against what a new user who installs these libraries from PyPI gets, not against our lock file.
#
# langchain-mcp-adapters needs a venv apart: it asks for mcp>=1.24 with no upper bound, so an installer picks mcp 2,
# with which 0.3.1 does not import (`from mcp.shared.context import RequestContext` fails), while fastmcp 4 needs
# mcp 2. Its users must pin mcp<2; so does this script, and docs/clients.md says so.
#
# Reproducible: the libraries are pinned exactly and their dependencies are resolved as PyPI stood on
# $exclude_newer, so a later release of a transitive dependency cannot change what gets installed.
# Idempotent: when a venv already holds exactly its pin set, nothing is reinstalled.
# Quiet: one line per venv on success, the installer's full output and a non-zero exit on any failure.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
exclude_newer="2026-11-24T00:00:00Z"

die() {
    echo "setup-clients.sh: $*" >&2
    exit 1
}

# uv, found the way scripts/setup.sh finds (or installs) it; $python picks Debian's interpreter.
# shellcheck source=scripts/find-uv.sh
source "$root/scripts/find-uv.sh"

# Checks that a venv holds each pin (PIN...), and when MODULE... are given that each imports.
check_script='
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
print(", ".join(found))
'

# ensure VENV PIN... -- MODULE...: VENV holds exactly the pins, installed when it does not; then each module imports.
ensure() {
    local venv="$1"
    shift
    local pins=() modules=() imports=() want log versions
    while [ "$1" != "--" ]; do
        pins+=("$1")
        shift
    done
    shift
    modules=("$@")
    local stamp="$venv/.setup-clients.sha256"
    want="$(printf '%s\n' "${pins[@]}" "$exclude_newer" "${python[@]}" | sha256sum | cut -d' ' -f1)"
    if [ ! -x "$venv/bin/python" ] || [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
        log="$(mktemp)"
        if ! {
            "$UV" venv --quiet --clear "${python[@]}" "$venv" &&
                "$UV" pip install --quiet --python "$venv/bin/python" --exclude-newer "$exclude_newer" "${pins[@]}"
        } >"$log" 2>&1; then
            cat "$log" >&2
            rm -f "$log"
            die "installing ${pins[*]} into $venv failed (output above)"
        fi
        rm -f "$log"
        # Imports are checked after an install only: importing these libraries takes seconds, and a venv whose
        # stamp matches is the one that passed. An import pulls in the MCP SDK the library was resolved against, so
        # a resolution the library cannot work with shows here and not in the middle of a test.
        imports=("${modules[@]}")
    fi
    versions="$("$venv/bin/python" -c "$check_script" "${pins[@]}" -- "${imports[@]}")" ||
        die "the venv at $venv does not hold the pinned libraries: $versions"
    echo "$want" >"$stamp"
    echo "setup-clients.sh: ${venv#"$root/"} has $versions" \
        "(Python $("$venv/bin/python" -c 'import platform; print(platform.python_version())'))"
}

ensure "$root/.cache/clients" \
    fastmcp==4.2.3 "pydantic-ai-slim[mcp]==2.68.0" openai-agents==0.24.0 mcp==2.3.0 -- \
    fastmcp pydantic_ai.mcp agents.mcp
ensure "$root/.cache/clients-langchain" \
    langchain-mcp-adapters==0.3.1 mcp==1.30.0 -- \
    langchain_mcp_adapters.client langchain_mcp_adapters.tools
