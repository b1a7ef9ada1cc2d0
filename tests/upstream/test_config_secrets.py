"""``${secret:NAME}`` in our own config files: read from MCP_BRIDGE_SECRETS_DIR, refused with a clear error that never
shows a value, and only ever a file of that directory, whatever a config author writes.

The secrets directory is laid out as the kubelet lays out a mounted Secret (each key a link through ``..data`` to a
timestamped directory), so what works here is what a pod sees. Pure: files in tmp_path, no process, no socket.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from mcp_codemode.upstream.config.discovery import ConfigSources, discover
from mcp_codemode.upstream.config.secrets import MAX_SECRET_BYTES
from mcp_codemode.upstream.model import Discovery
from mcp_codemode.upstream.servers.redaction import redaction_for
from tests.support.volumes import kubelet_volume

TOKEN = "tok-7f3a9c1e5b2d8a4f"


def kubelet_secret(root: Path, values: dict[str, str], version: str = "..2026_11_30_10_00_00.1") -> Path:
    return kubelet_volume(root, values, version)


def our_file(path: Path, servers: dict[str, Any]) -> Path:
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def read(tmp_path: Path, servers: dict[str, Any], secrets: Path | None, **extra: Any) -> Discovery:
    config = our_file(tmp_path / "team.json", servers)
    return discover(
        home=tmp_path / "home", cwd=tmp_path, env=extra.pop("env", {}), explicit=[config], use_defaults=False,
        secrets_dir=secrets, **extra,
    )  # fmt: skip


def only_problem(found: Discovery) -> str:
    assert not found.servers, found.servers
    assert len(found.problems) == 1, found.problems
    return found.problems[0].reason


def test_a_secret_fills_env_and_headers_from_a_mounted_secret_without_its_final_line_break(tmp_path: Path) -> None:
    pem = "-----BEGIN-----\nabc\n-----END-----"
    secrets = kubelet_secret(tmp_path / "secrets", {"token": TOKEN + "\n", "key": pem})
    found = read(tmp_path, {
        "remote": {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ${secret:token}"}},
        "local": {"command": "server", "env": {"API_TOKEN": "${secret:token}", "PEM": "${secret:key}"}},
    }, secrets)  # fmt: skip
    assert found.problems == ()
    servers = found.by_name()
    assert servers["remote"].headers == {"Authorization": f"Bearer {TOKEN}"}
    assert servers["local"].env == {"API_TOKEN": TOKEN, "PEM": pem}


def test_the_value_is_hidden_from_every_message_of_the_server(tmp_path: Path) -> None:
    secrets = kubelet_secret(tmp_path / "secrets", {"token": TOKEN})
    remote = {"url": "https://mcp.example.com/mcp", "headers": {"Authorization": "Bearer ${secret:token}"}}
    (config,) = read(tmp_path, {"remote": remote}, secrets).servers
    redaction = redaction_for(config, None)
    assert TOKEN not in redaction.for_sandbox(f"401: token {TOKEN} was refused")
    assert TOKEN not in redaction.for_host(f"401: token {TOKEN} was refused")


@pytest.mark.parametrize(
    "name",
    ["../../etc/shadow", "/etc/shadow", "sub/token", "..data", ".hidden", "..", "", "a b", "token:-x"],
)
def test_a_name_that_is_not_one_file_name_is_refused(tmp_path: Path, name: str) -> None:
    secrets = kubelet_secret(tmp_path / "secrets", {"token": TOKEN})
    (tmp_path / "secrets" / "sub").mkdir()
    (tmp_path / "secrets" / "sub" / "token").write_text(TOKEN)
    problem = only_problem(read(tmp_path, {"s": {"command": "x", "env": {"T": f"${{secret:{name}}}"}}}, secrets))
    assert "never a path" in problem, problem


def test_a_link_out_of_the_secrets_directory_is_refused(tmp_path: Path) -> None:
    outside = tmp_path / "elsewhere"
    outside.write_text("NOT-A-SECRET-OF-OURS")
    secrets = kubelet_secret(tmp_path / "secrets", {"token": TOKEN})
    (secrets / "planted").symlink_to(outside)
    (secrets / "etc").symlink_to("/etc/hostname")
    for name in ("planted", "etc"):
        problem = only_problem(read(tmp_path, {"s": {"command": "x", "env": {"T": f"${{secret:{name}}}"}}}, secrets))
        assert "outside that directory" in problem and "NOT-A-SECRET" not in problem, problem


@pytest.mark.parametrize(
    ("content", "where", "expected"),
    [
        (None, "env", "does not exist; add the key 'token' to the Secret"),
        ("", "env", "is empty"),
        ("line one\nline two", "headers", "line break or NUL"),
        ("nul\0byte", "env", "line break or NUL"),
        (b"\xff\xfe", "env", "not UTF-8"),
        ("x" * (MAX_SECRET_BYTES + 1), "env", "not a credential"),
        ("fifo", "env", "not a regular file"),
    ],
)
def test_a_secret_that_cannot_be_used_is_refused_naming_it_never_its_value(
    tmp_path: Path, content: str | bytes | None, where: str, expected: str
) -> None:
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    if content == "fifo":
        os.mkfifo(secrets / "token")  # a read would block the bridge: it is never opened for a wait
    elif isinstance(content, bytes):
        (secrets / "token").write_bytes(content)
    elif content is not None:
        (secrets / "token").write_text(content)
    entry: dict[str, Any] = (
        {"url": "https://x.example/mcp", "headers": {"X-Key": "${secret:token}"}}
        if where == "headers"
        else {"command": "x", "env": {"T": "${secret:token}"}}
    )
    problem = only_problem(read(tmp_path, {"s": entry}, secrets))
    assert expected in problem and "secret 'token' in" in problem, problem
    assert "line one" not in problem and "xxxx" not in problem


def test_a_secret_outside_env_and_headers_or_without_a_directory_is_refused(tmp_path: Path) -> None:
    secrets = kubelet_secret(tmp_path / "secrets", {"token": TOKEN})
    for entry, where in (
        ({"command": "x", "args": ["--token", "${secret:token}"]}, "args[1]"),
        ({"url": "https://x.example/mcp?key=${secret:token}"}, "url"),
        ({"command": "${secret:token}"}, "command"),
    ):
        problem = only_problem(read(tmp_path, {"s": entry}, secrets))
        assert f"in {where}; a secret may only fill a value of env or headers" in problem, problem
        assert TOKEN not in problem
    problem = only_problem(read(tmp_path, {"s": {"command": "x", "env": {"T": "${secret:token}"}}}, None))
    assert "MCP_BRIDGE_SECRETS_DIR is not set" in problem, problem


def test_other_clients_files_do_not_read_secrets(tmp_path: Path) -> None:
    """Only our own files know the form: in a Cursor or Claude Code file it is an expression no client resolves."""
    secrets = kubelet_secret(tmp_path / "secrets", {"token": TOKEN})
    (tmp_path / ".cursor").mkdir()
    our_file(tmp_path / ".cursor" / "mcp.json", {"s": {"command": "x", "env": {"T": "${secret:token}"}}})
    found = discover(home=tmp_path / "home", cwd=tmp_path, env={}, secrets_dir=secrets)
    assert [problem.server for problem in found.problems] == ["s"]
    assert "cannot resolve" in found.problems[0].reason
    # ./mcp-servers/*.json is ours: the same entry is read there.
    (tmp_path / "mcp-servers").mkdir()
    our_file(tmp_path / "mcp-servers" / "team.json", {"t": {"command": "x", "env": {"T": "${secret:token}"}}})
    found = discover(home=tmp_path / "home", cwd=tmp_path, env={}, secrets_dir=secrets)
    assert found.by_name()["t"].env == {"T": TOKEN}


def test_the_bridges_own_secrets_are_never_expanded_into_an_entry(tmp_path: Path) -> None:
    """A config author (a ConfigMap is often editable by more people than the Secret) cannot send the peer token
    or the clients' bearer tokens to a URL of their choosing."""
    env = {"MCP_BRIDGE_PEER_TOKEN": "p" * 40, "MCP_BRIDGE_HTTP_TOKEN": "h" * 24, "OTHER": "fine"}
    withheld = frozenset({"MCP_BRIDGE_PEER_TOKEN", "MCP_BRIDGE_HTTP_TOKEN"})
    for text in ("${MCP_BRIDGE_PEER_TOKEN}", "${env:MCP_BRIDGE_HTTP_TOKEN}"):
        entry = {"url": "https://evil.example/mcp", "headers": {"X": text}}
        problem = only_problem(read(tmp_path, {"s": entry}, None, env=env, withheld=withheld))
        assert "a secret of mcp-codemode itself" in problem and "p" * 40 not in problem, problem
    entry = {"url": "https://ok.example/mcp", "headers": {"X": "${OTHER}"}}
    assert read(tmp_path, {"s": entry}, None, env=env, withheld=withheld).servers[0].headers == {"X": "fine"}


def test_the_sources_watch_the_named_files_the_secrets_and_the_clients_files_when_read(tmp_path: Path) -> None:
    team = our_file(tmp_path / "team.json", {})
    folder = tmp_path / "servers.d"
    folder.mkdir()
    sources = ConfigSources(home=tmp_path / "home", cwd=tmp_path, env={}, explicit=(team, folder),
                            use_defaults=False, secrets_dir=tmp_path / "secrets")  # fmt: skip
    assert sources.watched() == ((team, False), (folder, True), (tmp_path / "secrets", True))
    everything = ConfigSources(home=tmp_path / "home", cwd=tmp_path, env={}, platform="linux").watched()
    assert (tmp_path / "mcp-servers", True) in everything and (tmp_path / ".mcp.json", False) in everything
