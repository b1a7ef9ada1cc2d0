"""The upstream side: the MCP servers the user configured, how they are found, connected and catalogued.

Four rooms, each a package that imports only the rooms below it (``tests/test_architecture.py`` checks it):
``registry/`` (servers not configured yet: registry entries, finding and adding them) over ``tools/`` (what
sandboxed code is shown of the servers: the tool directory, listings and their cache, ranked search, stubs, argument
validation, the policy's gate) over ``servers/`` (one live connection per server: launch, transports, OAuth
sign-ins, failures, restarts, roots, the links of a call in flight) over ``config/`` (finding the servers the user
already configured: discovery, readers, parsing, expansion, secrets, self-recognition, noticing a change). Beside
them the few words all three share: ``model.py`` (what one configured server is), ``errors.py`` (the errors the hub
raises, with their redaction) and ``suggest.py`` ("did you mean").
"""
