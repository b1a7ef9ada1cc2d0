"""The sandbox's environment is an allowlist (``SANDBOX_ENV``), on every backend, whatever the bridge's own holds.

The bridge here runs with secrets in its own environment and an upstream server whose config entry carries
credentials (``env``, ``headers``) and lives in a config file: none of it may be readable from inside the
sandbox, neither in ``os.environ`` nor in any process's ``/proc/<pid>/environ`` or command line, nor in what the
relay tells sandboxed code about the servers.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
from pathlib import Path

import pytest

from mcp_codemode.runs.bridge import Bridge, RunRequest
from mcp_codemode.sandbox.base import SANDBOX_ENV
from mcp_codemode.session_keys import SessionKey
from mcp_codemode.upstream.model import Discovery
from tests.support import upstreams
from tests.support.backends import sandbox_settings
from tests.support.cells import private_state_dir, reported

# What each runtime adds on its own, and why it is harmless:
RUNTIME_ADDS = {
    # bwrap exports the directory it changed into (--chdir /workspace), as a shell would.
    "bubblewrap": {"PWD": "/workspace"},
    # podman marks every container (container=podman, read by systemd and others to know where they run), sets
    # HOSTNAME to --hostname, and sets TERM=xterm even without -t; all three are constants, none from the host.
    "podman": {"container": "podman", "HOSTNAME": "sandbox", "TERM": "xterm"},
}
# The worker itself (guest/worker.py load_runtime): plots render to bytes, matplotlib's cache goes to the tmpfs.
GUEST_ADDS = {"MPLBACKEND": "Agg", "MPLCONFIGDIR": "/tmp/.matplotlib"}

BRIDGE_SECRET = "bridge-secret-0d5f9c1e"
SERVER_ENV_SECRET = "server-env-secret-7a41b2"
HEADER_SECRET = "header-secret-93c8e0aa"

PROBE = """
import json, os
seen = {}
for pid in os.listdir("/proc"):
    if pid.isdigit():
        for name in ("environ", "cmdline"):
            try:
                with open(f"/proc/{pid}/{name}", "rb") as handle:
                    seen[f"{pid}/{name}"] = handle.read().decode("utf-8", "replace")
            except OSError:
                pass
from mcp._rpc import rpc
servers = rpc.request("servers")
described = rpc.request("describe", server="everything")
report({"environ": dict(os.environ), "proc": seen, "servers": servers, "described": described})
"""


def test_the_sandbox_environment_is_exactly_the_allowlist(
    backend_name: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("GITHUB_TOKEN", BRIDGE_SECRET)
    monkeypatch.setenv("MCP_BRIDGE_HTTP_TOKEN", BRIDGE_SECRET)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", BRIDGE_SECRET)
    config_file = tmp_path / "client-config" / "mcp.json"
    server = dataclasses.replace(
        upstreams.everything(),
        env={"EVERYTHING_TOKEN": SERVER_ENV_SECRET},
        headers={"Authorization": f"Bearer {HEADER_SECRET}"},  # unused by stdio, but configured: must not leak
        source=str(config_file),
    )

    async def body() -> dict[str, object]:
        with private_state_dir() as state:
            settings = sandbox_settings(runtime=backend_name, state_dir=state)
            async with Bridge(settings, Discovery(servers=(server,), sources=(str(config_file),))) as bridge:
                assert bridge.backend_name == backend_name, bridge.backend_error
                code = "import json as _json\ndef report(value):\n    print(_json.dumps(value, default=repr))\n"
                result = await bridge.run(RunRequest(code + PROBE, timeout=60), SessionKey.cli("env"))
                seen: dict[str, object] = reported(result)
                return seen

    seen = asyncio.run(body())
    expected = {**SANDBOX_ENV, **RUNTIME_ADDS[backend_name], **GUEST_ADDS}
    assert seen["environ"] == expected
    everything = json.dumps(seen)
    for secret in (BRIDGE_SECRET, SERVER_ENV_SECRET, HEADER_SECRET, str(config_file), "client-config"):
        assert secret not in everything, secret
    assert seen["proc"], "the sandbox could read no /proc entry at all: the probe proved nothing"
