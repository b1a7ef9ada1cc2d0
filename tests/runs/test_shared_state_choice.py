"""Which stores ``MCP_BRIDGE_SHARED_STATE`` gives a bridge (pure logic: nothing connects until a store is used; the
stores themselves run against the emulated API server in tests/kube/test_shared_state_kmock.py)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from mcp_codemode.cluster.shared_state import SecretRecords
from mcp_codemode.errors import SandboxUnavailable, SettingsError
from mcp_codemode.runs import shared_state as shared_state_module
from mcp_codemode.runs.saved_tools import FileSavedTools
from mcp_codemode.runs.shared_state import ClusterSavedTools, shared_state
from mcp_codemode.settings import Settings
from mcp_codemode.upstream.servers.sign_ins import FileSignIns
from tests.support.backends import sandbox_settings


def test_files_is_the_default_and_keeps_both_under_the_state_directory(tmp_path: Path) -> None:
    state = shared_state(sandbox_settings(state_dir=tmp_path))
    assert isinstance(state.sign_ins, FileSignIns) and state.sign_ins.root == tmp_path / "oauth"
    assert isinstance(state.saved_tools, FileSavedTools) and state.saved_tools.files.root == tmp_path / "saved-tools"
    assert state.api is None


def test_kubernetes_keeps_both_in_the_namespace_and_connects_only_when_used(tmp_path: Path) -> None:
    settings = sandbox_settings(state_dir=tmp_path, shared_state="kubernetes", kube_namespace="team")
    state = shared_state(settings)
    assert isinstance(state.sign_ins, SecretRecords) and isinstance(state.saved_tools, ClusterSavedTools)
    assert state.sign_ins.where("docs-1") == "key docs-1 of Secret team/mcp-codemode-oauth"
    assert state.api is not None and state.api.config_file == settings.kube_config
    asyncio.run(state.aclose())  # never connected: nothing to close, no error


def test_kubernetes_without_the_client_is_refused_naming_the_setting_and_both_fixes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    def missing() -> None:
        raise SandboxUnavailable("the kubernetes backend needs the optional Kubernetes client", fix="install it")

    monkeypatch.setattr(shared_state_module, "require_client", missing)
    with pytest.raises(SettingsError, match=r"MCP_BRIDGE_SHARED_STATE=kubernetes keeps .* not installed") as caught:
        shared_state(sandbox_settings(shared_state="kubernetes"))
    assert "pip install 'mcp-codemode[kubernetes]'" in str(caught.value)
    assert "or set MCP_BRIDGE_SHARED_STATE=files" in str(caught.value)


def test_the_setting_takes_files_or_kubernetes_and_names_both_when_refusing_another() -> None:
    assert Settings.load(env={}).shared_state == "files"
    assert Settings.load(env={"MCP_BRIDGE_SHARED_STATE": " Kubernetes "}).shared_state == "kubernetes"
    with pytest.raises(
        SettingsError, match=r"MCP_BRIDGE_SHARED_STATE='nfs' is not valid: expected files .* kubernetes"
    ):
        Settings.load(env={"MCP_BRIDGE_SHARED_STATE": "nfs"})
