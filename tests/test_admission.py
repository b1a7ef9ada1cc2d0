"""Stdio upstream servers are refused on the kubernetes backend in a pod: settings with a stand-in token path.

Pure: the token is a file in tmp_path, the pod's variable an entry of a dict; nothing is started. The bridge is only
built (never entered), which starts nothing either. And the other thing a bridge admits or not before it runs
code: a writable mount over the configuration it reads again.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from mcp_codemode.admission import admit, refused_names
from mcp_codemode.mounts import config_paths_in_mounts
from mcp_codemode.runs.bridge import Bridge
from mcp_codemode.settings import Settings
from mcp_codemode.upstream.config.discovery import ConfigSources
from mcp_codemode.upstream.model import Discovery, ServerConfig

GIT = ServerConfig(name="git", alias="git", transport="stdio", source="/etc/mcp/team.json", command="mcp-server-git")
REMOTE = ServerConfig(name="search", alias="search", transport="http", source="/etc/mcp/team.json",
                      url="http://search.tools.svc:8080/mcp")  # fmt: skip
BOTH = Discovery(servers=(GIT, REMOTE))


def settings(tmp_path: Path, runtime: str, *, token: bool = False, **env: str) -> Settings:
    path = tmp_path / "serviceaccount" / "token"
    if token:
        path.parent.mkdir()
        path.write_text("eyJhbGciOi...")
    env = {"MCP_BRIDGE_RUNTIME": runtime, "MCP_BRIDGE_STATE_DIR": str(tmp_path / "state"), **env}
    return Settings.load(env=env, service_account_token=path)


@pytest.mark.parametrize(
    ("token", "env"), [(True, {}), (False, {"KUBERNETES_SERVICE_HOST": "10.96.0.1"})], ids=["token", "pod-variable"]
)
def test_a_stdio_server_is_refused_in_a_pod_on_the_kubernetes_backend_naming_why_and_the_fix(
    tmp_path: Path, token: bool, env: dict[str, str]
) -> None:
    kube = settings(tmp_path, "kubernetes", token=token, **env)
    admitted = admit(kube, BOTH)
    assert admitted.servers == (REMOTE,)
    (problem,) = admitted.problems
    assert problem.server == "git" and problem.source == "/etc/mcp/team.json"
    reason = problem.reason
    assert "stdio server" in reason and "service-account token" in reason, reason
    assert "HTTP MCP server of its own" in reason and '"Upstream servers for a team"' in reason, reason
    assert refused_names(kube, BOTH) == ("git",)
    bridge = Bridge(kube, BOTH)  # the bridge admits again, whoever built the discovery
    assert bridge.servers == ("search",)
    assert [p.server for p in bridge.discovery.problems] == ["git"]


def test_a_laptop_kubeconfig_or_another_backend_in_a_pod_keeps_its_stdio_servers(tmp_path: Path) -> None:
    laptop = settings(tmp_path, "kubernetes")
    assert laptop.pod == "" and admit(laptop, BOTH) == BOTH
    in_pod = settings(tmp_path, "bubblewrap", KUBERNETES_SERVICE_HOST="10.96.0.1")
    assert in_pod.pod and admit(in_pod, BOTH) == BOTH and refused_names(in_pod, BOTH) == ()


def test_a_refreshing_bridge_runs_no_code_with_a_writable_mount_over_its_config(tmp_path: Path) -> None:
    """Sandboxed code that could write the config a refreshing bridge reads could add a stdio server (a command the
    host runs within seconds): refused like a mount a server works in, naming the path, the mount and the fix."""
    project = tmp_path / "project"
    (project / "mcp-servers").mkdir(parents=True)
    outside = tmp_path / "team.json"
    outside.write_text('{"mcpServers": {}}')
    sources = ConfigSources(home=tmp_path / "home", cwd=project, env={}, explicit=(outside,), use_defaults=True)
    mounts = f"{project}:/mnt/project:rw"
    refreshing = settings(tmp_path, "bubblewrap", MCP_BRIDGE_MOUNTS=mounts, MCP_BRIDGE_CONFIG_REFRESH="5")
    refusal = Bridge(refreshing, Discovery(), sources=sources).mount_refusal
    assert f"{project / 'mcp-servers'} lies in the writable mount {project}" in refusal, refusal
    assert str(outside) not in refusal and "MCP_BRIDGE_CONFIG_REFRESH=0" in refusal, refusal
    read_only = settings(tmp_path, "bubblewrap", MCP_BRIDGE_MOUNTS=f"{project}:/mnt/project:ro",
                         MCP_BRIDGE_CONFIG_REFRESH="5")  # fmt: skip
    assert Bridge(read_only, Discovery(), sources=sources).mount_refusal == ""
    once = settings(tmp_path, "bubblewrap", MCP_BRIDGE_MOUNTS=mounts)  # read once: what it read is what it runs
    assert Bridge(once, Discovery(), sources=sources).mount_refusal == ""
    # ... until its next start, which doctor warns about: the same paths, the project's own client files among them
    watched = [path for path, _ in sources.watched()]
    planted = config_paths_in_mounts(once.mounts, watched)
    assert f"{project / '.mcp.json'} lies in the writable mount {project} (/mnt/project)" in planted, planted
    assert f"{project / 'mcp-servers'} lies in the writable mount {project} (/mnt/project)" in planted, planted
    assert not [line for line in planted if str(outside) in line or str(tmp_path / "home") in line], planted
    assert config_paths_in_mounts(read_only.mounts, watched) == []
