"""The console's pages as HTML text: every value that came from code, a client or a file is escaped here, by
``esc`` (the standard library's ``html.escape``, quotes included), and nothing else builds markup.

Why no templating library: the pages are a few tables and forms, and one function per page that escapes each value
as it places it is shorter than a template language and a dependency; the Content-Security-Policy (``app.py``)
forbids inline script besides, so a value that slipped through unescaped still could not run.
"""

from __future__ import annotations

import datetime
import html
import re
from collections.abc import Iterable, Sequence
from typing import Any

import mcp_types as types

from ..runs.approval_question import visible
from ..runs.approvals import Waiting
from ..runs.call_board import CallSeen, SessionSeen
from ..runs.saved_tools import SavedTool
from ..runs.upstream_view import ServerView
from ..session_keys import BadSessionKey, SessionKey
from .audit_reader import AuditedCall, Search

_SHOWN_IMAGES = ("image/png", "image/jpeg", "image/gif", "image/webp")
_BASE64 = re.compile(r"[A-Za-z0-9+/]*={0,2}")
OUTCOMES = ("ok", "error", "timeout", "crashed", "cancelled", "bridge_error")


def esc(value: object) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def when(stamp: float) -> str:
    return datetime.datetime.fromtimestamp(stamp, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def ago(seconds: float) -> str:
    seconds = max(seconds, 0.0)
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def layout(
    title: str,
    body: str,
    *,
    live: int | None = None,
    signed_in: str = "",
    csrf: str = "",
    base: str,
    watch: str = "",
    head: str = "",
) -> str:
    """A whole page; a ``live`` one (the board's version it shows) is refreshed by the script whenever the server's
    event stream says the board changed since (``watch``: more for the stream to follow, as a query string, such as
    the servers' states the page shows). ``head``: markup for the head (a page that moves on by itself)."""
    nav = ""
    if signed_in:
        places = (("sessions", "Sessions"), ("calls", "Calls"), ("approvals", "Approvals"), ("servers", "Servers"),
                  ("search", "Search"), ("tools", "Saved tools"), ("doctor", "Doctor"))  # fmt: skip
        links = "".join(f'<a href="{base}/{page}">{label}</a>' for page, label in places)
        sign_out = f'<form method="post" action="{base}/sign-out">{csrf_field(csrf)}<button>Sign out</button></form>'
        nav = f'<nav>{links}<span class="who">{esc(signed_in)}</span>{sign_out}</nav>'
    attributes = f' data-live="{base}/events?since={live}{esc(watch)}"' if live is not None else ""
    return (
        "<!doctype html>\n"
        f'<html lang="en"><head><meta charset="utf-8"><title>{esc(title)} · mcp-codemode</title>'
        f'<meta name="viewport" content="width=device-width, initial-scale=1">'
        f'<link rel="stylesheet" href="{base}/static/console.css">'
        f'<script src="{base}/static/console.js" defer></script>{head}</head>'
        f"<body>{nav}<main{attributes}><h1>{esc(title)}</h1>{body}</main></body></html>\n"
    )


def csrf_field(csrf: str) -> str:
    return f'<input type="hidden" name="csrf" value="{esc(csrf)}">'


def _action(base: str, path: str, label: str, csrf: str, fields: dict[str, str] | None = None) -> str:
    hidden = "".join(f'<input type="hidden" name="{esc(k)}" value="{esc(v)}">' for k, v in (fields or {}).items())
    return (f'<form method="post" action="{base}/{path}" class="inline">{csrf_field(csrf)}{hidden}'
            f'<button>{esc(label)}</button></form>')  # fmt: skip


def _table(headers: Sequence[str], rows: Iterable[Sequence[str]], empty: str) -> str:
    body = "".join("<tr>" + "".join(f"<td>{cell}</td>" for cell in row) + "</tr>" for row in rows)
    if not body:
        return f'<p class="empty">{esc(empty)}</p>'
    head = "".join(f"<th>{esc(h)}</th>" for h in headers)
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def size(value: int | None) -> str:
    """Bytes as a person reads them; "unknown" rather than a guess when they could not be read."""
    if value is None:
        return "unknown"
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if value >= factor:
            return f"{value / factor:.1f} {unit}"
    return f"{value} B"


def sessions_page(seen: Sequence[tuple[SessionSeen, str, int | None]], backend: str, now: float, base: str,
                  csrf: str) -> str:  # fmt: skip
    """The principal's sessions, each with its state (running, hibernated, reset...) and the memory it takes: its
    sandbox's while it runs, its snapshot's on disk while it sleeps, nothing without a sandbox."""
    rows = []
    for session, state, memory in seen:
        key = str(session.key)
        actions = _action(base, "sessions/reset", "Reset", csrf, {"session": key})
        actions += _action(base, "sessions/end", "End", csrf, {"session": key})
        name = f'<span class="session">{esc(session.key.name)}</span>'
        last = esc(ago(now - session.last_call)) + " ago"
        used = size(memory) if state == "running" else f"{size(memory)} on disk" if state.startswith("hib") else ""
        rows.append([name, esc(ago(now - session.created)), last, esc(session.calls), esc(backend), esc(state),
                     f'<span class="memory">{esc(used)}</span>', actions])  # fmt: skip
    return _table(("Session", "Age", "Last call", "Calls", "Backend", "State", "Memory", ""), rows,
                  "No sessions yet: they appear here after their first call.")  # fmt: skip


def _call_link(base: str, call: str) -> str:
    return f'<a class="call" href="{base}/calls/{esc(call)}">{esc(call)}</a>'


def calls_page(running: Sequence[CallSeen], finished: Sequence[AuditedCall], kept: Sequence[CallSeen],
               wanted: Search, audit_on: bool, now: float, base: str, csrf: str) -> str:  # fmt: skip
    """Running calls (cancel each), then the finished ones: from the audit log, or from memory when it is off."""
    rows = [[_call_link(base, c.call), esc(c.key.name), esc(when(c.started)),
             f'<span class="elapsed" data-since="{c.started:.3f}">{esc(ago(now - c.started))}</span>',
             f'<span class="progress">{esc(c.progress)}</span>' if c.progress else "",
             _action(base, f"calls/{c.call}/cancel", "Cancel", csrf)] for c in running]  # fmt: skip
    parts = ["<h2>Running</h2>", _table(("Call", "Session", "Started", "Elapsed", "Progress", ""), rows,
                                        "No call is running.")]  # fmt: skip
    parts.append("<h2>Finished</h2>" + _search_form(wanted, base))
    if audit_on:
        done = [[esc(f.time.replace("T", " ")), _call_link(base, f.call), esc(session_name(f.session)),
                 esc(f.outcome or "?"),
                 esc(_duration(f.run)),
                 esc(", ".join(sorted({f"{u.get('server')}.{u.get('tool') or u.get('uri') or u.get('prompt')}"
                                       for u in f.uses}))),
                 esc((f.run or {}).get("trace_id", ""))] for f in finished]  # fmt: skip
        parts.append(_table(("Time", "Call", "Session", "Outcome", "Duration", "Tools used", "Trace"), done,
                            "No finished call matches."))  # fmt: skip
    else:
        parts.append(
            '<p class="note">The audit log is off (MCP_BRIDGE_AUDIT_LOG=off): these are the calls since '
            "the bridge started, without their upstream tool calls.</p>"
        )
        done = [[esc(when(c.started)), _call_link(base, c.call), esc(c.key.name), esc(c.outcome),
                 esc(f"{c.duration * 1000:.1f} ms"), "", esc(c.trace_id)] for c in kept]  # fmt: skip
        parts.append(_table(("Time", "Call", "Session", "Outcome", "Duration", "Tools used", "Trace"), done,
                            "No call has ended yet."))  # fmt: skip
    return "".join(parts)


def session_name(key: str) -> str:
    """A session as its client names it (``p:t-abc:work`` is ``work``), from the audit log's key."""
    try:
        return SessionKey.parse(key).name
    except BadSessionKey:
        return key


def _duration(run: dict[str, Any] | None) -> str:
    value = (run or {}).get("duration_ms")
    return f"{value:g} ms" if isinstance(value, int | float) else ""


def _search_form(wanted: Search, base: str) -> str:
    def box(name: str, label: str, value: str, hint: str = "") -> str:
        return (f'<label>{esc(label)} <input name="{name}" value="{esc(value)}" placeholder="{esc(hint)}">'
                "</label>")  # fmt: skip

    options = "".join(f'<option value="{o}"{" selected" if wanted.outcome == o else ""}>{o or "any"}</option>'
                      for o in ("", *OUTCOMES))  # fmt: skip
    return (f'<form method="get" action="{base}/calls" class="search">'
            + box("session", "Session", wanted.session) + box("server", "Server", wanted.server)
            + box("tool", "Tool", wanted.tool)
            + f'<label>Outcome <select name="outcome">{options}</select></label>'
            + box("since", "From", wanted.since, "2026-11-28T07") + box("until", "To", wanted.until, "2026-11-28")
            + "<button>Search</button></form>")  # fmt: skip


def output_blocks(result: types.CallToolResult) -> str:
    """The tool result as the model received it: each text block as text, each image shown (as a data: URL, of the
    few types a browser shows as a picture and nothing else)."""
    parts = []
    for block in result.content:
        if isinstance(block, types.TextContent):
            parts.append(f'<pre class="output">{esc(block.text)}</pre>')
        elif isinstance(block, types.ImageContent):
            if block.mime_type in _SHOWN_IMAGES and _BASE64.fullmatch(block.data):
                parts.append(f'<img class="output" alt="an image the code showed" '
                             f'src="data:{block.mime_type};base64,{block.data}">')  # fmt: skip
            else:
                parts.append(f'<p class="note">An image of type {esc(block.mime_type)}, not shown here.</p>')
    return "".join(parts) or '<p class="empty">No output.</p>'


def call_page(call: str, seen: CallSeen | None, rendered: types.CallToolResult | None, audited: AuditedCall | None,
              now: float, base: str, csrf: str) -> str:  # fmt: skip
    run: dict[str, Any] = (audited.run if audited is not None else None) or {}
    facts: list[tuple[str, str]] = [("Call", call)]
    if seen is not None:
        facts += [("Session", seen.key.name), ("Started", when(seen.started))]
        if seen.result is None:
            facts.append(("State", f"running for {ago(now - seen.started)}"))
        else:
            facts += [("Outcome", seen.outcome), ("Duration", f"{seen.duration * 1000:.1f} ms")]
        trace = seen.trace_id
    else:
        facts += [("Session", session_name(str(run.get("session", "")))), ("Started", str(run.get("time", ""))),
                  ("Outcome", str(run.get("outcome", ""))), ("Duration", _duration(run))]  # fmt: skip
        trace = str(run.get("trace_id", ""))
    facts.append(("Trace id", trace or "not traced (MCP_BRIDGE_TRACING is off, or the call was not sampled)"))
    if run.get("code_sha256"):
        facts.append(("Code sha256", str(run["code_sha256"])))
    parts = ["<dl>" + "".join(f"<dt>{esc(k)}</dt><dd>{esc(v)}</dd>" for k, v in facts) + "</dl>"]
    if seen is not None and seen.result is None:
        parts.append(_action(base, f"calls/{call}/cancel", "Cancel this call", csrf))
    if seen is not None:
        parts.append(f'<h2>Code</h2><pre class="code">{esc(seen.code)}</pre>')
        if rendered is not None:
            parts.append("<h2>Output, as the model saw it</h2>" + output_blocks(rendered))
    else:
        parts.append(
            '<p class="note">The code and output of this call are not held any more: the console keeps '
            "those of the last calls in memory only, and the audit log never holds code or output.</p>"
        )
    uses = audited.uses if audited is not None else []
    rows = [[esc(u.get("time", "")), esc(u.get("kind", "tool")), esc(u.get("server")),
             esc(u.get("tool") or u.get("uri") or u.get("prompt")), esc(u.get("outcome")),
             esc(f"{u.get('duration_ms')} ms"), esc(u.get("rule", "")), esc(u.get("approval", "")),
             esc(u.get("error", "")), esc(u.get("result_bytes"))] for u in uses]  # fmt: skip
    parts.append("<h2>Upstream calls</h2>" + _table(
        ("Time", "Kind", "Server", "Tool", "Outcome", "Duration", "Policy rule", "Approval", "Error", "Result bytes"),
        rows, "No upstream call (or the audit log is off)."))  # fmt: skip
    return "".join(parts)


def approvals_page(waiting: Sequence[Waiting], mode: str, now: float, base: str, csrf: str) -> str:
    """The calls waiting for the signed-in principal's approval: each exactly as it will be sent (the server, the
    tool, the arguments as the client's question would show them), with Approve and Deny; the forms carry the
    approval's id and the digest of what is shown here, so an answer never approves anything else."""
    if mode == "client":
        return ('<p class="empty">Approvals are answered by the MCP client alone here (MCP_BRIDGE_APPROVALS=client): '
                "nothing waits on this page.</p>")  # fmt: skip
    parts = []
    for w in waiting:
        fields = {"approval": w.id, "digest": w.digest}
        buttons = "".join(_action(base, "approvals/answer", label, csrf, {**fields, "decision": decision})
                          for decision, label in (("grant", "Approve"), ("deny", "Deny")))  # fmt: skip
        parts.append(
            f'<section class="approval"><h2><span class="tool">{esc(visible(w.server))}/{esc(visible(w.tool))}</span>'
            f"</h2><dl><dt>Server</dt><dd>{esc(visible(w.server))}</dd><dt>Tool</dt><dd>{esc(visible(w.tool))}</dd>"
            f"<dt>Why</dt><dd>{esc(visible(w.why))}</dd><dt>Session</dt><dd>{esc(session_name(w.session))}</dd>"
            f"<dt>Call</dt><dd>{_call_link(base, w.call)}</dd><dt>Waiting</dt><dd>{esc(ago(now - w.asked))}</dd></dl>"
            f'<h3>Arguments</h3><pre class="arguments">{esc(w.shown)}</pre>{buttons}</section>'
        )
    return "".join(parts) or '<p class="empty">No call is waiting for your approval.</p>'


def tools_page(saved: Sequence[SavedTool], problems: Sequence[str], base: str, csrf: str) -> str:
    """Each saved tool: its name, description, when it was saved, its source (folded), and Delete."""
    rows = [[f'<span class="tool">{esc(tool.name)}</span>', esc(tool.description), esc(when(tool.saved_at)),
             f'<details><summary>source</summary><pre class="code">{esc(tool.source)}</pre></details>',
             _action(base, "tools/delete", "Delete", csrf, {"name": tool.name})] for tool in saved]  # fmt: skip
    notes = "".join(f'<p class="problem">{esc(problem)}</p>' for problem in problems)
    return notes + _table(("Tool", "Description", "Saved", "Source", ""), rows,
                          "No saved tools: code keeps one with runtime.save_tool(func).")  # fmt: skip


def servers_page(servers: Sequence[ServerView], may_restart: bool, base: str, csrf: str) -> str:
    """Each configured server: state, tools (folded), restarts, last error; Restart for an operator. Every text came
    secret-free from the Bridge (``runs/upstream_view.py``) and is escaped here besides."""
    rows = []
    for server in servers:
        state = server.state
        if server.state == "failed" and server.retry_in:
            state += f" (the next call tries again in {server.retry_in:.0f} s)"
        if server.signed_in is not None:
            state += ", signed in" if server.signed_in else ", not signed in"
        names = ", ".join(server.tools)
        tools = (f"<details><summary>{len(server.tools)} ({esc(server.listing)})</summary>{esc(names)}</details>"
                 if server.tools else esc("not listed yet"))  # fmt: skip
        actions = ""
        if may_restart and server.sign_in:
            actions += _action(base, "servers/sign-in", "Sign in", csrf, {"name": server.name})
        if may_restart and server.restartable:
            actions += _action(base, "servers/restart", "Restart", csrf, {"name": server.name})
        rows.append([f'<span class="server">{esc(server.name)}</span>', esc(server.transport),
                     f'<code>{esc(server.target)}</code>', esc(state), tools, esc(server.restarts),
                     esc(server.error), actions])  # fmt: skip
    note = ('<p class="note">A remote server that needs OAuth: <em>Sign in</em> opens its sign-in in this browser '
            "and brings you back here (the same sign-in as <code>mcp-codemode login NAME</code> on the bridge's "
            "machine, and the same store of tokens).</p>")  # fmt: skip
    if not may_restart:
        note += ('<p class="note">Read-only: the upstream servers are shared by every token of this bridge, so only '
                 "its operators (MCP_BRIDGE_CONSOLE_OPERATORS) may restart them or sign them in.</p>")  # fmt: skip
    return note + _table(("Server", "Transport", "Runs", "State", "Tools", "Restarts", "Last error", ""), rows,
                         "No MCP server is configured.")  # fmt: skip


def moving_on(title: str, text: str, to: str, label: str, base: str) -> str:
    """A page that goes on to ``to`` by itself (a meta refresh: no script), with a link should it not."""
    head = f'<meta http-equiv="refresh" content="0;url={esc(to)}">'
    body = f'<p>{esc(text)}</p><p><a href="{esc(to)}">{esc(label)}</a></p>'
    return layout(title, body, base=base, head=head)


def search_page(query: str, found: dict[str, Any] | None, base: str) -> str:
    """A query box and, once asked, the tools ``runtime.search_tool_docs(query)`` would give code, best first."""
    form = (f'<form method="get" action="{base}/search" class="search"><label>Query <input name="q" '
            f'value="{esc(query)}" placeholder="read a file" size="50"></label>'
            "<button>Search</button></form>")  # fmt: skip
    if found is None:
        return (
            form + '<p class="note">Ranks the tools of every server as <code>runtime.search_tool_docs</code> '
            "does for code.</p>"
        )
    rows = [[esc(hit.get("score")), esc(hit.get("server")), f'<span class="tool">{esc(hit.get("tool"))}</span>',
             f"<code>{esc(hit.get('alias'))}</code>", esc(hit.get("description", "")),
             esc(", ".join(str(name) for name in hit.get("required", [])))]
            for hit in found.get("results", [])]  # fmt: skip
    parts = [
        form,
        f'<p class="note">{esc(found.get("total", 0))} tools match.</p>',
        _table(("Score", "Server", "Tool", "In code", "Description", "Required"), rows, "No tool matches."),
    ]
    also = [[esc(hit.get("kind")), esc(hit.get("server")), esc(hit.get("name")), esc(hit.get("description", "")),
             f"<code>{esc(hit.get('use'))}</code>"] for hit in found.get("also", [])]  # fmt: skip
    if also:
        parts.append("<h2>Prompts and resources</h2>" + _table(("Kind", "Server", "Name", "Description", "Use"),
                                                                also, ""))  # fmt: skip
    if found.get("pending"):
        parts.append(f'<p class="note">Still listing (search again shortly): {esc(", ".join(found["pending"]))}</p>')
    for gone in found.get("unavailable", []):
        parts.append(f'<p class="note">Not searched: {esc(gone.get("server"))}: {esc(gone.get("reason"))}</p>')
    return "".join(parts)


def doctor_page(report: str) -> str:
    return f'<pre class="doctor">{esc(report)}</pre>'


def sign_in_page(base: str, tokens: bool, problem: str = "") -> str:
    """How to sign in: a one-time link (the log, `mcp-codemode console`), or over HTTP with tokens, the token."""
    parts = [f'<p class="problem">{esc(problem)}</p>'] if problem else []
    if tokens:
        parts.append(f'<form method="post" action="{base}/sign-in"><label>Bearer token '
                     '<input type="password" name="token" autocomplete="off"></label><button>Sign in</button></form>'
                     "<p>Sign in with the bearer token your MCP client uses: you will see that token's sessions "
                     "and calls, no others.</p>")  # fmt: skip
    else:
        parts.append(
            "<p>Open the one-time sign-in link the bridge wrote in its log, or run "
            "<code>mcp-codemode console</code> on this machine.</p>"
        )
    return "".join(parts)
