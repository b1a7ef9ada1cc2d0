"""``from mcp.servers.<alias> import <tool>``: each configured MCP server appears here as a module.

The modules are made on import by ``mcp._proxies.ServerModuleFinder`` from the servers the bridge lists
for this session; there are no files for them.
"""
