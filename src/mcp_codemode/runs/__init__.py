"""The run service: one ``run_python`` call from its arrival at the bridge to its result, behind every face.

``bridge`` is the composition root: it builds the parts below once (the tool directory, the audit log, the saved
tools, the relay) and hands them down. ``sessions`` and ``warm_pool`` own the named sessions and the workers that
serve them; the relay modules answer the requests sandboxed code sends while a cell runs, under the policy (its
rules and guard in ``mcp_codemode/policy/``), with one ``audit`` line per tool call. Nothing here knows how the
call reached the bridge (stdio, HTTP or the command line) or how its result is rendered, so the faces can change
without touching it.
"""
