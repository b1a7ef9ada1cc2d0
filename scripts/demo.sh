#!/usr/bin/env bash
# The main job end to end: set up, show what this machine can sandbox, run a real session.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh
mc=.venv/bin/mcp-codemode

echo "== mcp-codemode doctor"
$mc doctor

echo
echo "== a real sandboxed session on the default backend (state carries over between cells)"
$mc run -v \
    -c 'import os, sys, platform
print("inside the sandbox: uid", os.getuid(), "python", platform.python_version(), "cwd", os.getcwd())
readings = [3, 1, 4, 1, 5, 9, 2, 6]' \
    -c 'import statistics
summary = {"n": len(readings), "mean": statistics.mean(readings), "max": max(readings)}
summary' \
    -c 'import asyncio
await asyncio.sleep(0.01)
try:
    open("/etc/shadow").read()
except OSError as exc:
    print("host secrets are out of reach:", type(exc).__name__)
try:
    import socket; socket.create_connection(("1.1.1.1", 53), timeout=2)
except OSError as exc:
    print("no network:", type(exc).__name__)
f"still here: {len(readings)} readings"'

echo
echo "== a timeout interrupts the code but keeps the session's state"
set +e
$mc run --timeout 1 -c 'x = "kept"' -c 'import time; time.sleep(30)'
echo "exit status $? (124 = timeout)"
