"""``python -m mcp_codemode.cli``: the same program as ``mcp-codemode``, for configs written before the package."""

import sys

from .entry import main

sys.exit(main())
