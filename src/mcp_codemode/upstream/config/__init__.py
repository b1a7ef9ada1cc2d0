"""Configuration: finding the MCP servers the user already configured for their other clients, and reading them.

Owns discovery and precedence (``discovery.py``), each client's files and formats (``readers.py``), one raw entry
(``entry.py``) normalised into a ``ServerConfig`` (``parse.py``), variables and ``${secret:NAME}`` files
(``expand.py``, ``secrets.py``), recognising an entry that is a code-mode bridge (``selfref.py``) and noticing
that the configuration changed on disk (``refresh.py``). Nothing here connects to a server: it imports only the
shared words of ``upstream/`` (``model``, ``errors``) and the core below, never ``servers/`` or ``tools/``.
"""
