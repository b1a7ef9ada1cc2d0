"""The face: what an MCP client talks to, and nothing behind it.

These modules speak MCP to the client (stdio in ``stdio``, Streamable HTTP behind an Origin check and bearer tokens
in ``web``), list the one tool and the capabilities resource, check a call's arguments and pick its session
(``server``), and turn an execution into the result a model reads (``render``, ``summary``). They are kept apart
from the run service below them so that a new transport or a new output format never touches sandboxes,
upstream servers or the policy: the face calls ``Bridge.run`` and renders what comes back.
"""
