"""Tools: what sandboxed code is shown of the upstream servers, and the checks on what it asks of them.

Owns the tool directory (``directory.py``, with the settings it reads as a protocol), the listing it serves and
its values (``served.py``, ``listing.py``), the catalog cache on disk (``listing_cache.py``), tool docs and stubs
(``catalog.py``, ``stubs.py``, ``tool_wire.py``), ranked search over tools and the rest (``ranking.py``,
``words.py``, ``extras.py``), arguments checked against a schema (``validate.py``) and the questions asked of the
policy (``gate.py``). The top room: it may import ``servers/``, ``config/`` and the shared words; none of them
imports it.
"""
