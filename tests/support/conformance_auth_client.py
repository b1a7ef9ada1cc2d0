"""The client command the official conformance suite's auth scenarios run: ``python -m
tests.support.conformance_auth_client SERVER_URL`` (the suite appends the URL and sets ``MCP_CONFORMANCE_SCENARIO``
and, for a pre-registered client, ``MCP_CONFORMANCE_CONTEXT``).

It signs the bridge in to the suite's protected server exactly as a user would, through ``mcp-codemode login``
(the real command, in its own process): it reads the address the command prints and "opens" it with an HTTP
client that follows the suite's authorization server back to the command's loopback redirect, as a browser
would. Then it runs one sandboxed cell through the bridge, whose hub signs its requests with the stored tokens,
so the suite sees the bridge itself, not only the sign-in, use the token. Exit status 0 when both worked.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import urllib.parse
from pathlib import Path

import httpx2

BRIDGE = Path(sys.executable).with_name("mcp-codemode")
NAME = "conformance"
SECRET_ENV = "CONFORMANCE_CLIENT_SECRET"


def main(url: str) -> int:
    context = json.loads(os.environ.get("MCP_CONFORMANCE_CONTEXT") or "{}")
    with tempfile.TemporaryDirectory(prefix="conformance-client-") as folder:
        os.chmod(folder, 0o711)  # the sandbox's uid passes through to the staged worker, as for any state dir
        config = Path(folder) / "servers.json"
        entry: dict[str, str] = {"url": url}
        if os.environ.get("MCP_CONFORMANCE_PROTOCOL_VERSION", "").startswith("2026"):
            entry["protocol"] = os.environ["MCP_CONFORMANCE_PROTOCOL_VERSION"]  # the scenario's server speaks it only
        config.write_text(json.dumps({"mcpServers": {NAME: entry}}), encoding="utf-8")
        env = {**os.environ, "MCP_BRIDGE_STATE_DIR": str(Path(folder) / "state"), "MCP_BRIDGE_RUNTIME": "bubblewrap"}
        options = ["--no-discover", "--config", str(config)]
        extra: list[str] = []
        if isinstance(context.get("client_id"), str):
            env[SECRET_ENV] = str(context.get("client_secret") or "")
            extra = ["--client-id", context["client_id"], "--port", str(_free_port())]
            if context.get("client_secret"):
                extra += ["--client-secret-env", SECRET_ENV]
        login = [str(BRIDGE), "login", NAME, "--no-browser", *extra, *options]
        if sign_in(login, env) != 0:
            return 1
        run = use(options, env)
        if run.returncode != 0 and f"mcp-codemode login {NAME}" in run.stdout + run.stderr:
            # The server wants a new sign-in (its authorization server moved, say): the error names the command, and
            # a user runs it and tries again.
            if sign_in(login, env) != 0:
                return 1
            run = use(options, env)
        return run.returncode


def use(options: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """One sandboxed cell through the bridge that lists the server's tools (with the stored tokens)."""
    cell = (  # lists the tools and calls each that takes no argument: a call may need more than a listing (step-up)
        f"for tool in await runtime.query_tool_docs({NAME!r}):\n"
        "    if not tool.get('required'):\n"
        f"        print(tool['tool'], await runtime.call_tool({NAME!r}, tool['tool'], {{}}))"
    )
    run = subprocess.run([str(BRIDGE), "run", "-c", cell, *options], env=env, capture_output=True, text=True,
                         timeout=300, check=False)  # fmt: skip
    print(run.stdout, run.stderr, sep="\n", file=sys.stderr)
    return run


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
    login, seen, address = start_login(command, env)
    if address is None:
        out, err = login.communicate(timeout=300)
        print(seen + out + err, file=sys.stderr)
        return login.returncode or 1
    with httpx2.Client(timeout=60) as browser:
        answer = browser.get(address, follow_redirects=False)
        hops = 0
        while answer.status_code in (301, 302, 303, 307, 308) and hops < 5:
            target = urllib.parse.urljoin(str(answer.url), answer.headers["location"])
            answer = browser.get(target, follow_redirects=False)
            hops += 1
    out, err = login.communicate(timeout=300)
    print(seen + out + err, file=sys.stderr)
    return login.returncode


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


if __name__ == "__main__":
    sys.exit(main(sys.argv[-1]))
