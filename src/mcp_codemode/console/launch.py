"""Where the console is served and how a person gets in: on the HTTP face's port under ``/console``, or on a stdio
bridge's own loopback port; the sign-in link in the log; and the state file `mcp-codemode console` finds it by.

Why a state file: a stdio bridge is started by its client (Claude Desktop, Cursor...), so nobody knows its port or
reads its log; each running console writes ``<state_dir>/console/<pid>.json`` (0600, in a 0700 folder: its key lets
whoever reads it sign in as this user), and removes it when it stops. `mcp-codemode console` reads the newest one
whose process lives, asks that bridge for a fresh one-time link with the key (a POST no browser can make: no web
page knows the key, and the console refuses the endpoint to any request with an Origin), and opens it. The key never
reaches a browser, a URL or a log.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import socket
import time
import urllib.request
import webbrowser
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any, TextIO

import anyio
import uvicorn
from starlette.types import ASGIApp, Receive, Scope, Send

from ..console_settings import CONSOLE_PATH
from ..errors import CodemodeError
from ..face.addresses import is_loopback
from ..runs.bridge import Bridge
from ..settings import Settings
from ..state_files import make_private_dir, write_json
from ..upstream.model import Discovery
from .app import Console

log = logging.getLogger("mcp_codemode.console")


def build(bridge: Bridge, settings: Settings, discovery: Discovery, *, loopback: bool) -> Console:
    """The console of ``bridge``, whose doctor page reports on ``discovery``'s servers as `doctor` does."""

    def doctor() -> str:
        from ..cli.doctor import diagnose, render_text  # doctor's checks, only when its page is asked for

        return render_text(diagnose(settings, discovery))

    return Console(bridge, settings, loopback=loopback, doctor=doctor)


def front(app: ASGIApp, console: Console) -> ASGIApp:
    """``app`` with the console in front of it for every path under ``/console`` (the HTTP face's port)."""

    async def route(scope: Scope, receive: Receive, send: Send) -> None:
        path = scope.get("path", "") if scope["type"] == "http" else ""
        if path == CONSOLE_PATH or path.startswith(CONSOLE_PATH + "/"):
            await console(scope, receive, send)
        else:
            await app(scope, receive, send)

    return route


def _origin(host: str, port: int) -> str:
    shown = "127.0.0.1" if host in ("0.0.0.0", "::", "[::]", "") else host  # noqa: S104 - a name, not a bind  # every address: this one answers too
    shown = f"[{shown.strip('[]')}]" if ":" in shown else shown
    return f"http://{shown}:{port}"


def state_folder(settings: Settings) -> Path:
    return settings.state_dir / "console"


@contextlib.contextmanager
def announced(console: Console, settings: Settings, host: str, port: int) -> Any:
    """Log where the console is (with a one-time sign-in link, when one can sign in) and keep its state file while
    the ``with`` block runs."""
    origin = _origin(host, port)
    if console.launcher_key:
        log.info("web console at %s%s; sign in (once, within 10 minutes) at %s, or run `mcp-codemode console`",
                 origin, CONSOLE_PATH, console.sign_in_link(origin))  # fmt: skip
    else:
        log.info("web console at %s%s (sign in with a bearer token)", origin, CONSOLE_PATH)
    folder = state_folder(settings)
    path = folder / f"{os.getpid()}.json"
    try:
        make_private_dir(folder)
        write_json(path, {"pid": os.getpid(), "url": origin + CONSOLE_PATH, "key": console.launcher_key,
                          "started": time.time()})  # fmt: skip
    except OSError as exc:
        log.warning("console: cannot write %s (%s): `mcp-codemode console` will not find this bridge", path, exc)
    try:
        yield
    finally:
        with contextlib.suppress(OSError):
            path.unlink()


class _LeavesSignals(uvicorn.Server):
    """uvicorn without its signal handlers: the stdio bridge beside it decides when to stop, and stops this one."""

    @contextlib.contextmanager
    def capture_signals(self) -> Any:
        yield


def bind_console(settings: Settings) -> socket.socket | None:
    """The stdio bridge's console socket on 127.0.0.1, or None (logged) when the port is taken: a console that
    cannot listen must not stop the bridge its client is waiting for."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", settings.console_port))
    except OSError as exc:
        sock.close()
        log.error("console: cannot listen on 127.0.0.1:%d (%s); choose another MCP_BRIDGE_CONSOLE_PORT (0: any free "
                  "port); the bridge runs on without its console", settings.console_port, exc.strerror)  # fmt: skip
        return None
    return sock


@contextlib.asynccontextmanager
async def served_on_loopback(bridge: Bridge, settings: Settings, discovery: Discovery) -> AsyncIterator[None]:
    """A stdio bridge's console on its own 127.0.0.1 port while the ``with`` block runs."""
    sock = bind_console(settings)
    if sock is None:
        yield
        return
    console = build(bridge, settings, discovery, loopback=True)
    config = uvicorn.Config(console, log_config=None, log_level="warning", access_log=False, lifespan="off",
                            timeout_graceful_shutdown=1)  # fmt: skip
    server = _LeavesSignals(config)
    with contextlib.closing(sock), announced(console, settings, "127.0.0.1", sock.getsockname()[1]):
        async with anyio.create_task_group() as group:
            group.start_soon(lambda: server.serve(sockets=[sock]))
            try:
                yield
            finally:
                server.should_exit = True


def on_http_face(bridge: Bridge, settings: Settings, discovery: Discovery) -> Console:
    """The HTTP face's console (its port is bound already, so its address is known from the settings)."""
    return build(bridge, settings, discovery, loopback=is_loopback(settings.http_host))


# --------------------------------------------------------------------------------------- mcp-codemode console
def running_consoles(settings: Settings) -> list[dict[str, Any]]:
    """The state files of consoles whose bridge still runs, newest first."""
    found = []
    for path in state_folder(settings).glob("*.json"):
        try:
            entry = json.loads(path.read_text(encoding="utf-8"))
            os.kill(int(entry["pid"]), 0)
        except ProcessLookupError:
            with contextlib.suppress(OSError):
                path.unlink()  # a bridge that died without removing it
            continue
        except (OSError, ValueError, KeyError, TypeError):
            continue
        found.append(entry)
    return sorted(found, key=lambda entry: -float(entry.get("started", 0)))


def console_link(entry: dict[str, Any], timeout: float = 10.0) -> str:
    """A one-time sign-in link from the running bridge of ``entry`` (or its sign-in page, for a bridge with tokens)."""
    url = str(entry["url"])
    if not url.startswith("http://"):  # what the bridge wrote; anything else is not its file
        raise CodemodeError(f"the console state file names {url!r}, not a bridge's address",
                            fix="remove the file named after its pid in the console state folder")  # fmt: skip
    if not entry.get("key"):
        return url + "/sign-in"
    headers = {"Authorization": f"Bearer {entry['key']}"}
    request = urllib.request.Request(url + "/link", data=b"", method="POST", headers=headers)  # noqa: S310
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:  # noqa: S310 - the bridge's own http URL
            return str(json.loads(answer.read())["url"])
    except (OSError, ValueError, KeyError) as exc:
        raise CodemodeError(f"the bridge at {url} did not give a sign-in link ({exc})",
                            fix="check that it still runs, or restart it") from None  # fmt: skip


def open_console(settings: Settings, out: TextIO, *, browser: bool = True,
                 opener: Callable[[str], bool] = webbrowser.open) -> int:  # fmt: skip
    """`mcp-codemode console`: open the newest running bridge's console in a browser (or print its link)."""
    entries = running_consoles(settings)
    if not entries:
        raise CodemodeError(
            f"no running bridge serves a console here (none has a state file in {state_folder(settings)})",
            fix="set MCP_BRIDGE_CONSOLE=on in the environment of the bridge your client starts (or of `mcp-codemode "
            "serve`), restart it, and run this again with the same MCP_BRIDGE_STATE_DIR",
        )
    entry = entries[0]
    link = console_link(entry)
    if len(entries) > 1:
        print(f"{len(entries)} bridges serve a console; opening the newest (pid {entry['pid']})", file=out)
    if not browser or not opener(link):
        print(f"open this link in a browser (it works once, within 10 minutes): {link}", file=out)
    else:
        print(f"opened the console of the bridge with pid {entry['pid']}", file=out)
    return 0
