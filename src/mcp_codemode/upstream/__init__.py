"""The upstream side: the MCP servers the user configured, how they are found, connected and catalogued."""
