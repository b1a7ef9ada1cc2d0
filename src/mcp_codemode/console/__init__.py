"""The web console: a few server-rendered pages on the bridge itself, for the person who runs it, that show the
sessions and calls of whoever signed in (live, by server-sent events), let them cancel a call or reset or end a
session, show what one call did (its code, its output as the model saw it, its upstream tool calls) and what
`doctor` says. Off unless ``MCP_BRIDGE_CONSOLE`` is on (docs/console.md).

It stands above the face: it renders a result as the face does (``face/render.py``) and reads doctor's report
(``cli/doctor.py``), and it asks the ``Bridge`` for everything else through its public surface (the call board,
``runs/call_board.py``). Its own guards (``guards.py``, ``signins.py``) come before any page: the Host and Origin
checks, a sign-in that becomes a cookie, and a CSRF token on every action.
"""
