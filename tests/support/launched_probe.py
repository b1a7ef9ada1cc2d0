"""What a module launched through the fork server sees (tests/test_bridge_zygote.py): its arguments, working
directory and environment as ``python -m`` would give them, and whether it was forked with the bridge imported."""

from __future__ import annotations

import json
import os
import sys

if __name__ == "__main__":
    forked = "mcp_codemode.runs.bridge" in sys.modules  # a new interpreter has not imported it by now
    said = {"argv": sys.argv[1:], "cwd": os.getcwd(), "probe": os.environ.get("PROBE"), "forked": forked}
    print(json.dumps(said), flush=True)
    sys.exit(3)
