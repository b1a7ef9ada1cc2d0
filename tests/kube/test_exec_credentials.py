"""Every exec stream uses the credentials current when it opens: an exec-plugin kubeconfig (as GKE and EKS write)
whose token rotates while the bridge runs, against the EMULATED API server and the exec stand-in (not a cluster:
tests/support/kube_emulator.py, tests/support/exec_endpoint.py). What is real: kubernetes_asyncio running the plugin
and refreshing an expired credential, the backend's claims and exec handshakes, and the emulator refusing any token
but the current one."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from mcp_codemode.cluster import naming
from mcp_codemode.sandbox.kube.backend import KubernetesBackend
from tests.support.backends import sandbox_settings
from tests.support.cells import private_state_dir
from tests.support.exec_endpoint import ExecEndpoint
from tests.support.kube_deps import KUBE_TEST_DEPS_PROBLEM, require_kube_test_deps

if not KUBE_TEST_DEPS_PROBLEM:
    from tests.support.kube_emulator import agent_sandbox_controller, emulated_cluster

pytestmark = [pytest.mark.anyio, pytest.mark.backend]  # loopback servers, a plugin process, a sandbox
NAMESPACE = "mcp-codemode"
LIFETIME = 1  # seconds a token of the plugin lives: long enough for one launch, short enough to wait out

# The credential plugin: the token in TOKEN_FILE, said to expire LIFETIME seconds from now.
PLUGIN = """\
import datetime, json, os, sys
token = open(os.environ["TOKEN_FILE"]).read().strip()
expires = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=int(os.environ["LIFETIME"]))
json.dump({"apiVersion": "client.authentication.k8s.io/v1", "kind": "ExecCredential",
           "status": {"token": token, "expirationTimestamp": expires.strftime("%Y-%m-%dT%H:%M:%SZ")}}, sys.stdout)
"""


def plugin_kubeconfig(path: Path, server: str, token_file: Path) -> Path:
    plugin = path.with_suffix(".py")
    plugin.write_text(PLUGIN, encoding="utf-8")
    exec_user = {
        "apiVersion": "client.authentication.k8s.io/v1",
        "command": sys.executable,
        "args": [str(plugin)],
        "env": [{"name": "TOKEN_FILE", "value": str(token_file)}, {"name": "LIFETIME", "value": str(LIFETIME)}],
        "interactiveMode": "Never",
    }
    config = {
        "apiVersion": "v1", "kind": "Config", "current-context": "emulator",
        "clusters": [{"name": "emulator", "cluster": {"server": server}}],
        "users": [{"name": "bridge", "user": {"exec": exec_user}}],
        "contexts": [{"name": "emulator", "context": {"cluster": "emulator", "user": "bridge"}}],
    }  # fmt: skip
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path


async def test_an_exec_stream_opened_after_the_token_rotated_uses_the_new_one(tmp_path: Path) -> None:
    """Two launches of one backend: the first with the plugin's first token, then the token rotates (the emulator
    accepts only the new one from then on) and the old one expires. The second launch's claim and exec stream must
    carry the new token; the exec header was captured once at connect before issue 32, and every later stream
    was refused with 401."""
    require_kube_test_deps()
    token_file = tmp_path / "token"
    token_file.write_text("first-token", encoding="utf-8")
    seen: list[str] = []
    with private_state_dir() as state:
        base = sandbox_settings(state_dir=state)
        async with emulated_cluster(tmp_path) as (emulator, _):
            emulator.declare(naming.GROUP, naming.VERSION, naming.CLAIMS)
            emulator.declare(naming.SANDBOX_GROUP, naming.VERSION, naming.SANDBOXES)
            emulator.token = "first-token"

            def authorize(attributes: tuple[str, str, str, str], namespace: str, header: str) -> Any:
                seen.append(header)
                return emulator.decide(attributes, namespace, header)

            async with (
                agent_sandbox_controller(emulator, NAMESPACE),
                ExecEndpoint(base, api_url=emulator.address, authorize=authorize) as endpoint,
            ):
                kubeconfig = plugin_kubeconfig(tmp_path / "kubeconfig", endpoint.url, token_file)
                backend = KubernetesBackend(sandbox_settings(state_dir=state, kube_config=kubeconfig, replica="r-a"))
                try:
                    first = await backend.launch("w1", {})
                    await first.cleanup()
                    token_file.write_text("second-token", encoding="utf-8")
                    emulator.token = "second-token"
                    await asyncio.sleep(LIFETIME + 1.5)  # the first credential expires: the plugin is run again
                    second = await backend.launch("w2", {})
                    await second.cleanup()
                finally:
                    await backend.close()
    assert seen[0] == "Bearer first-token", seen
    assert seen[-1] == "Bearer second-token", seen
