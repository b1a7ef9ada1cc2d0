"""The client command the official conformance suite's auth scenarios run: ``python -m
tests.support.conformance_auth_client SERVER_URL`` (the suite appends the URL and sets ``MCP_CONFORMANCE_SCENARIO``
and, for a pre-registered client, ``MCP_CONFORMANCE_CONTEXT``).

It signs the bridge in to the suite's protected server exactly as a user would, through ``mcp-codemode login``
(the command line's own entry point): it reads the address the command prints and "opens" it with an HTTP client
that follows the suite's authorization server back to the command's loopback redirect, as a browser would. Then it
runs one sandboxed cell with ``mcp-codemode run``, whose bridge signs its requests with the tokens ``login``
stored, so the suite sees the bridge itself, not only the sign-in, use the token. Exit status 0 when both worked.

Both commands run in this one process (``login`` on a thread, its printed lines read through a pipe), as they
would one after the other in a shell: each ``mcp-codemode`` process spends most of its start importing the MCP
SDK, and the suite runs this command some thirty times. Nothing is handed from one to the other in memory: the
tokens go through the sign-in store on disk, as between two processes. ``sign_in`` (a ``login`` process of its
own) serves the tests that need one.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import urllib.parse

import httpx2

NAME = "conformance"
SECRET_ENV = "CONFORMANCE_CLIENT_SECRET"


def main(url: str) -> int:
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    with tempfile.TemporaryDirectory(prefix="conformance-client-") as folder:
        os.chmod(folder, 0o711)  # the sandbox's uid passes through to the staged worker, as for any state dir
        config = os.path.join(folder, "servers.json")
        entry: dict[str, str] = {"url": url}
        if os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION", "").startswith("2026"):
            entry["protocol"] = os.environ["MCP_CONFORMANCE_PROTOCOL_VERSION"]  # the scenario's server speaks it only
        with open(config, "w", encoding="utf-8") as file:
            json.dump({"mcpServers": {NAME: entry}}, file)
        os.environ.update(MCP_BRIDGE_STATE_DIR=os.path.join(folder, "state"), MCP_BRIDGE_RUNTIME="bubblewrap")
        options = ["--no-discover", "--config", config]
        extra: list[str] = []
        if isinstance(context.get("client_id"), str):
            os.environ[SECRET_ENV] = str(context.get("client_secret") or "")
            extra = ["--client-id", context["client_id"], "--port", str(_free_port())]
            if context.get("client_secret"):
                extra += ["--client-secret-env", SECRET_ENV]
        login = ["login", NAME, "--no-browser", *extra, *options]
        if sign_in_here(login) != 0:
            return 1
        status, said = use(options)
        if status != 0 and f"mcp-codemode login {NAME}" in said:
            # The server wants a new sign-in (its authorization server moved, say): the error names the command, and
            # a user runs it and tries again.
            if sign_in_here(login) != 0:
                return 1
            status, said = use(options)
        return status


def use(options: list[str]) -> tuple[int, str]:
    """One sandboxed cell through the bridge that lists the server's tools (with the stored tokens): its exit
    status and what it printed."""
    from tests.support.cli_here import cli_here

    cell = (  # lists the tools and calls each that takes no argument: a call may need more than a listing (step-up)
        f"for tool in await runtime.query_tool_docs({NAME!r}):\n"
        "    if not tool.get('required'):\n"
        f"        print(tool['tool'], await runtime.call_tool({NAME!r}, tool['tool'], {{}}))"
    )
    run = cli_here(dict(os.environ), "run", "-c", cell, *options)
    print(run.stdout, run.stderr, sep="\n", file=sys.stderr)
    return run.returncode, run.stdout + run.stderr


def sign_in_here(argv: list[str]) -> int:
    """``mcp-codemode login`` in this process, its address opened as by ``sign_in``: its exit status."""
    from mcp_codemode.cli.main import main as codemode

    read, write = os.pipe()
    status: list[int] = []
    with os.fdopen(read, encoding="utf-8") as lines, os.fdopen(write, "w", encoding="utf-8", buffering=1) as printed:

        def command() -> None:
            try:
                with contextlib.redirect_stdout(printed):
                    status.append(codemode(argv))
            finally:
                printed.close()  # the reader's end of the lines

        login = threading.Thread(target=command, name="login")
        login.start()
        seen = ""
        for line in lines:
            seen += line
            if line.strip().startswith("http"):
                browse(line.strip())
                break
        seen += lines.read()
        login.join()
    print(seen, file=sys.stderr)
    return status[0] if status else 1


def start_login(command: list[str], env: dict[str, str]) -> tuple[subprocess.Popen[str], str, str | None]:
    """Start ``mcp-codemode login`` and read what it prints up to the address to open: (process, text, address)."""
    login = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert login.stdout is not None
    seen = ""
    for line in login.stdout:
        seen += line
        if line.strip().startswith("http"):
            break
    return login, seen, next((part for part in seen.split() if part.startswith("http")), None)


def sign_in(command: list[str], env: dict[str, str]) -> int:
    """``login`` in a process of its own (``command``), its address opened as a browser would: its exit status."""
    login, seen, address = start_login(command, env)
    if address is None:
        out, err = login.communicate(timeout=300)
        print(seen + out + err, file=sys.stderr)
        return login.returncode or 1
    browse(address)
    out, err = login.communicate(timeout=300)
    print(seen + out + err, file=sys.stderr)
    return login.returncode


def browse(address: str) -> None:
    """Open ``address`` as a browser would: follow the authorization server's redirects to the loopback one."""
    with httpx2.Client(timeout=60) as browser:
        answer = browser.get(address, follow_redirects=False)
        hops = 0
        while answer.status_code in (301, 302, 303, 307, 308) and hops < 5:
            target = urllib.parse.urljoin(str(answer.url), answer.headers["location"])
            answer = browser.get(target, follow_redirects=False)
            hops += 1


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


if __name__ == "__main__":
    sys.exit(main(sys.argv[-1]))
