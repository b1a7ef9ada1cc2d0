"""Servers: one persistent MCP client connection per configured upstream server, and everything about keeping it.

Owns the hub and each connection's state machine (``hub.py``, ``connection.py``), launching a stdio server and
reading its log (``launch.py``), opening the transport (``transport.py``, ``watch.py``), OAuth sign-in and the
sign-in store (``oauth.py``, ``sign_ins.py``), wording an outage (``failures.py``), restarts (``restart.py``),
asking a server who it is (``identity.py``), redaction, paging, the roots servers are given (``roots.py``) and the
links from a call in flight back to its ``run_python`` call (``call_links.py``). It imports ``config/`` and the
shared words below it, never ``tools/``: what code is shown of a server's tools is decided above.
"""
