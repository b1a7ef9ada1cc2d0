"""Servers the user has not configured yet: the MCP registries and catalogs that name them, and the ones added.

A fourth room beside ``config/`` (which reads what the user's clients already configure): ``entries.py`` is what
one registry entry (a ``server.json``) says, read defensively because a registry is a third party. Finding
candidates (registry clients, their cache, a local catalog) and adding one with a person's consent build on it.
Nothing here starts a server: an added server becomes a ``ServerConfig`` like any configured one, and the hub
in ``servers/`` runs it. The top room: it may use the rooms below (``config/`` for what clients configure,
``tools/`` for ranking), never the other way round.
"""
