"""The kubernetes backend: sandboxes as agent-sandbox ``SandboxClaim``s, workers reached over ``pods/exec``.

Everything here needs the ``kubernetes`` extra (``pip install 'mcp-codemode[kubernetes]'``); the core install does
not pull a Kubernetes client, so nothing outside this package and ``cluster/`` (the API client, names, Leases and
permissions this backend shares with the face's replicas) imports it, and both import the client only inside the
functions that need it.
"""
