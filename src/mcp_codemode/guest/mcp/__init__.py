"""The ``mcp`` package as code inside the sandbox sees it: ``import mcp.runtime as runtime``.

It lives in the guest directory, which the worker puts first on ``sys.path``, so it shadows any MCP SDK
installed in the sandbox's Python: inside the sandbox, ``mcp`` means the bridge's API. Standard library only.
"""
