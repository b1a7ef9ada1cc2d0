"""Opening the transport to one upstream server: an HTTP or SSE client, or a stdio server launched now.

Apart from the connection (``connection.py``) because choosing and building a transport from a server's config
is a job of its own, done once per start and reading nothing of the connection's state machine: the
connection only enters what this returns. The launcher's pieces it uses for stdio are in ``launch.py``.
"""

from __future__ import annotations

import json
import logging
import os
from contextlib import AsyncExitStack

import httpx2
from mcp.client import Transport
from mcp.client.sse import sse_client
from mcp.client.stdio import StdioServerParameters, stdio_client
from mcp.client.streamable_http import streamable_http_client

from ..model import ServerConfig
from .launch import INNER_SCRIPT, OUTER_SCRIPT, SH, LaunchError, ServerLog, resolve_command

# The hub's logger: the bridge's log lines carry the logger name, and these kept theirs when the code moved here.
logger = logging.getLogger("mcp_codemode.upstream.hub")


async def open_transport(
    stack: AsyncExitStack,
    config: ServerConfig,
    server_log: ServerLog,
    *,
    start: int,
    call_timeout: float,
    setpriv: str | None,
    auth: httpx2.Auth | None = None,
) -> Transport:
    """The transport to one server: an HTTP or SSE client, or a stdio server launched (and logged) now.

    ``auth`` signs a remote server's requests (OAuth, ``oauth.py``), when the bridge holds tokens for it."""
    # An HTTP read may take as long as the longest call (the hub's own timeouts bound every request).
    read_timeout = max(300.0, call_timeout, config.timeout or 0.0) + 30.0
    if config.transport == "http":
        timeouts, hooks = httpx2.Timeout(30.0, read=read_timeout), {"request": [trace_headers]}
        http = await stack.enter_async_context(
            httpx2.AsyncClient(headers=dict(config.headers), timeout=timeouts, auth=auth, event_hooks=hooks)
        )
        logger.info("connecting to upstream %r at %s", config.name, config.url)
        return streamable_http_client(config.url, http_client=http)
    if config.transport == "sse":
        logger.info("connecting to upstream %r at %s", config.name, config.url)
        return sse_client(config.url, headers=dict(config.headers) or None, sse_read_timeout=read_timeout, auth=auth)
    command = resolve_command(config)
    if config.cwd is not None and not os.path.isdir(config.cwd):
        raise LaunchError(f"its working directory {config.cwd!r} does not exist; fix cwd in {config.source}")
    errlog = stack.enter_context(server_log.open(start))
    guard = [setpriv, "--pdeathsig", "KILL", "--"] if setpriv else []
    # sh exports PWD to what it runs; the server gets exactly its configured environment, so drop it.
    unset = "" if "PWD" in config.env else "unset PWD; "
    inner = [SH, "-c", unset + INNER_SCRIPT, "mcp-codemode-server", *guard, command, *config.args]
    argv = [*guard, SH, "-c", unset + OUTER_SCRIPT, "mcp-codemode-launcher", *inner]
    logger.info("starting upstream %r: %s", config.name, config.target)
    params = StdioServerParameters(command=argv[0], args=argv[1:], env=dict(config.env) or None, cwd=config.cwd)
    return stdio_client(params, errlog=errlog)


_TRACE_KEYS = ("traceparent", "tracestate", "baggage")


async def trace_headers(request: httpx2.Request) -> None:
    """Repeat a request's trace context (``params._meta``: the SDK writes the caller's span there) as HTTP headers,
    as the MCP conventions ask of HTTP transports, so the upstream's HTTP server (a gateway, a proxy) joins the same
    trace. The body is only parsed when it names a ``traceparent``: a bridge whose tracing is off never writes one,
    so there the cost is one search of the body's bytes."""
    body = request.content
    if b'"traceparent"' not in body:
        return
    try:
        meta = json.loads(body)["params"]["_meta"]
    except (ValueError, KeyError, TypeError):
        return
    for key in _TRACE_KEYS:
        value = meta.get(key) if isinstance(meta, dict) else None
        if isinstance(value, str) and value.isascii() and value.isprintable():
            request.headers[key] = value
