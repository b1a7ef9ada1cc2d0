#!/usr/bin/env bash
# The main job end to end: set up, show what this machine can sandbox, then be an agent: start the bridge
# as an MCP server over stdio with the official SDK client, run code in the sandbox, print what the model reads.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/setup.sh

echo "== mcp-codemode doctor"
.venv/bin/mcp-codemode doctor

echo
echo "== an agent's session through a real MCP client (stdio, default sandbox)"
.venv/bin/python scripts/demo_agent.py "$@"
