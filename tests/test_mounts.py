"""MCP_BRIDGE_MOUNTS as pure logic: parsing, the refusals and their messages, the cross-checks with other settings,
the mode-bit access check doctor uses, the backends' arguments and the capability summary. No sandbox needed: the
real sandboxes are in tests/sandbox/test_mounts_in_sandboxes.py."""

from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path
from typing import Any

import pytest

from mcp_codemode.errors import SettingsError
from mcp_codemode.mounts import (
    Mount,
    MountError,
    access_problem,
    mount_order,
    parse_mounts,
    refusal,
    shared_with_servers,
)
from mcp_codemode.runs.summary import capability_summary
from mcp_codemode.sandbox.bubblewrap import BubblewrapBackend
from mcp_codemode.sandbox.container import ContainerBackend
from mcp_codemode.settings import Settings
from mcp_codemode.upstream.model import ServerConfig


@pytest.fixture
def data(tmp_path: Path) -> Path:
    (tmp_path / "data").mkdir()
    (tmp_path / "out").mkdir()
    return tmp_path


def test_entries_parse_with_read_only_as_the_default(data: Path) -> None:
    mounts = parse_mounts(f" {data}/data:/mnt/data , {data}/out:/workspace/out:rw,{data}/data:/data:ro,")
    assert mounts == (
        Mount(data / "data", "/mnt/data", False),
        Mount(data / "out", "/workspace/out", True),
        Mount(data / "data", "/data", False),
    )
    assert [m.mode for m in mounts] == ["ro", "rw", "ro"]
    assert parse_mounts("") == () == Settings().mounts


def test_the_host_directory_is_stored_as_its_real_path(data: Path) -> None:
    (data / "link").symlink_to(data / "data")
    (mount,) = parse_mounts(f"{data}/link:/mnt/data")
    assert mount.host == Path(os.path.realpath(data / "data"))


@pytest.mark.parametrize(
    ("entry", "complaint"),
    [
        ("data:/mnt/data", "is not an absolute path"),
        ("{d}/absent:/mnt/data", "does not exist or is not a directory"),
        ("{d}/data/file:/mnt/data", "does not exist or is not a directory"),
        ("{d}/data:mnt/data", "'mnt/data' is not absolute"),
        ("{d}/data:/mnt/../etc", "is not normalized (write it as /etc)"),
        ("{d}/data:/mnt/data/", "is not normalized (write it as /mnt/data)"),
        ("{d}/data://mnt", "is not normalized"),
        ("{d}/data:/mnt/./data", "is not normalized"),
        ("{d}/data:/", "is the sandbox's own"),
        ("{d}/data:/workspace", "is the sandbox's own"),
        ("{d}/data:/proc/x", "on or under /proc"),
        ("{d}/data:/etc", "on or under /etc"),
        ("{d}/data:/usr/local/data", "on or under /usr"),
        ("{d}/data:/tmp/data", "on or under /tmp"),
        ("{d}/data:/opt/mcp-codemode", "on or under /opt"),
        ("{d}/data:/lib32/x", "on or under /lib32"),
        ("{d}/data:/mnt/data:rx", "the mode 'rx' is neither ro nor rw"),
        ("{d}/da:ta:/mnt/data", "a path may hold no ':'"),
        ("{d}/data:/mnt/da:ta:ro", "a path may hold no ':'"),
        ("{d}/data", "expected HOST_DIR:SANDBOX_PATH"),
        ("{d}/data:/mnt/a,{d}/out:/mnt/a", "are the same or nested"),
        ("{d}/data:/mnt/a,{d}/out:/mnt/a/b", "are the same or nested"),
        ("{d}/data:/mnt/a/b,{d}/out:/mnt/a", "are the same or nested"),
    ],
)
def test_a_bad_entry_is_refused_naming_it_and_showing_a_good_one(data: Path, entry: str, complaint: str) -> None:
    text = entry.format(d=data)
    with pytest.raises(MountError, match=complaint.replace("(", r"\(").replace(")", r"\)")):
        parse_mounts(text)
    with pytest.raises(SettingsError) as caught:
        Settings.load(env={"MCP_BRIDGE_MOUNTS": text})
    message = str(caught.value)
    assert message.startswith(f"MCP_BRIDGE_MOUNTS={text!r} is not valid")
    assert complaint in message and "for example MCP_BRIDGE_MOUNTS=/srv/data:/mnt/data:ro" in message


def test_neighbours_that_only_share_a_prefix_are_not_nested(data: Path) -> None:
    assert len(parse_mounts(f"{data}/data:/mnt/a,{data}/out:/mnt/ab,{data}/data:/optical")) == 3


def test_the_settings_file_takes_a_list_and_says_where_a_bad_entry_was(data: Path) -> None:
    file = data / "settings.toml"
    file.write_text(f'mounts = ["{data}/data:/mnt/data", "{data}/out:/mnt/out:rw"]\n')
    settings = Settings.load(env={"MCP_BRIDGE_STATE_DIR": str(data / "state")}, settings_file=file)
    assert settings.mounts == (Mount(data / "data", "/mnt/data", False), Mount(data / "out", "/mnt/out", True))
    assert settings.sources["mounts"] == str(file)
    file.write_text(f'mounts = ["{data}/data:/etc/data"]\n')
    with pytest.raises(SettingsError, match=f"mounts in {file}=.*on or under /etc"):
        Settings.load(env={}, settings_file=file)


@pytest.mark.parametrize("where", ["state", "state/sub", ""])
def test_a_mount_that_is_holds_or_lies_in_the_state_directory_is_refused(data: Path, where: str) -> None:
    state = data / "state"
    (state / "sub").mkdir(parents=True)
    host = data / where if where else data
    with pytest.raises(SettingsError, match=r"the bridge's state directory \S+ \(its tokens"):
        Settings.load(env={"MCP_BRIDGE_MOUNTS": f"{host}:/mnt/data", "MCP_BRIDGE_STATE_DIR": str(state)})
    beside = Settings.load(env={"MCP_BRIDGE_MOUNTS": f"{data}/data:/mnt/data", "MCP_BRIDGE_STATE_DIR": str(state)})
    assert beside.mounts[0].target == "/mnt/data"


def test_the_kubernetes_backend_refuses_mounts_at_start_and_points_at_the_sandbox_template(data: Path) -> None:
    env = {"MCP_BRIDGE_RUNTIME": "kubernetes", "MCP_BRIDGE_MOUNTS": f"{data}/data:/mnt/data"}
    with pytest.raises(SettingsError, match=r"volume of the SandboxTemplate's pod .*docs/kubernetes\.md"):
        Settings.load(env=env)
    assert Settings.load(env={"MCP_BRIDGE_RUNTIME": "kubernetes"}).mounts == ()


def _owned(path: Path, mode: int) -> tuple[int, int]:
    path.chmod(mode)
    info = path.stat()
    return info.st_uid, info.st_gid


def test_access_follows_the_kernels_owner_group_others_rule(data: Path) -> None:
    ro, rw = Mount(data / "data", "/mnt/data", False), Mount(data / "data", "/mnt/data", True)
    owner, group = _owned(data / "data", 0o750)
    stranger = owner + 12345
    assert access_problem(ro, owner, group, through_parents=False) is None
    assert access_problem(rw, owner, group, through_parents=False) is None
    assert access_problem(ro, stranger, group, through_parents=False) is None  # the group's r-x
    problem = access_problem(rw, stranger, group, through_parents=False)
    assert problem is not None and "lacks read, write and search permission" in problem[0] and "0750" in problem[0]
    assert f"give uid {stranger} read, write and search permission" in problem[1]
    denied = access_problem(ro, stranger, group + 1, through_parents=False)
    assert denied is not None and "lacks read and search permission" in denied[0]
    _owned(data / "data", 0o755)
    data.chmod(0o700)
    assert access_problem(ro, stranger, group + 1, through_parents=False) is None
    blocked = access_problem(ro, stranger, group + 1, through_parents=True)
    assert blocked is not None and f"cannot pass through {data}" in blocked[0]


def test_each_backend_mounts_read_only_unless_rw_after_the_workspace(data: Path) -> None:
    mounts = parse_mounts(f"{data}/data:/mnt/data,{data}/out:/workspace/out:rw")
    settings = Settings(mounts=mounts, state_dir=data / "state")
    assert ContainerBackend.mount_option(mounts[0]) == f"type=bind,src={data}/data,dst=/mnt/data,readonly=true"
    assert ContainerBackend.mount_option(mounts[1]) == f"type=bind,src={data}/out,dst=/workspace/out"
    limits = {limit.name: limit.value for limit in BubblewrapBackend(settings).enforced_limits()}
    assert limits["/mnt/data"] == "ro" and limits["/workspace/out"] == "rw"
    podman = {limit.name: limit.mechanism for limit in ContainerBackend(settings, "podman").enforced_limits()}
    assert podman["/mnt/data"].endswith(f"of {data}/data")


def test_the_capability_summary_names_each_place_and_mode_but_no_host_path(data: Path) -> None:
    mounts = parse_mounts(f"{data}/data:/mnt/data,{data}/out:/workspace/out:rw")
    text = capability_summary(Settings(mounts=mounts, state_dir=data / "state"), "bubblewrap")
    assert "/mnt/data (read-only)" in text and "/workspace/out (writable" in text
    assert str(data) not in text
    assert "Host directories" not in capability_summary(Settings(state_dir=data / "state"), "bubblewrap")


def test_a_read_only_mount_may_sit_in_a_writable_one_as_the_same_directory(data: Path) -> None:
    (data / "out" / ".git").mkdir()
    (data / "out" / "linked").symlink_to(data / "out" / ".git")
    inner, outer = f"{data}/out/.git:/mnt/out/.git:ro", f"{data}/out:/mnt/out:rw"
    mounts = parse_mounts(f"{inner},{outer},{data}/data:/mnt/data")
    assert [m.target for m in mount_order(mounts)] == ["/mnt/out", "/mnt/data", "/mnt/out/.git"]
    refused = {
        "another directory": f"{data}/data:/mnt/out/.git:ro,{outer}",
        "through a link": f"{data}/out/.git:/mnt/out/linked:ro,{outer}",
        "writable in writable": f"{data}/out/.git:/mnt/out/.git:rw,{outer}",
        "read-only in read-only": f"{inner},{data}/out:/mnt/out:ro",
        "writable in read-only": f"{data}/out/.git:/mnt/out/.git:rw,{data}/out:/mnt/out:ro",
    }
    for case, seen in (("another directory", ".git"), ("through a link", "linked")):
        with pytest.raises(
            MountError, match=rf"is not the same directory seen through it \(\S+/out/{seen}, with no link"
        ):
            parse_mounts(refused.pop(case))
    for entries in refused.values():
        with pytest.raises(MountError, match="only a read-only mount may sit inside a writable one"):
            parse_mounts(entries)


def _server(name: str, *args: str, command: str = "mcp-server", **changes: Any) -> ServerConfig:
    return ServerConfig(name, name, "stdio", "test", command=command, args=args, **changes)


@pytest.fixture
def repo(data: Path) -> Path:
    (data / "repo" / "src").mkdir(parents=True)
    (data / "link").symlink_to(data / "repo")
    return data / "repo"


@pytest.mark.parametrize(
    ("server", "path", "how", "bridge_cwd"),
    [
        (_server("git", "--repository", "{repo}"), "{repo}", "its argument '{repo}'", "{data}"),
        (_server("git", "--repository={link}/src"), "{repo}/src", "its argument '--repository={link}/src'", "{data}"),
        (_server("files", "{data}"), "{data}", "its argument '{data}'", "{data}"),
        (_server("git", "--repository", ".", cwd="{repo}"), "{repo}", "its cwd {repo}", "{data}"),  # once
        (_server("local", command="{repo}/.venv/bin/server"), "{repo}/.venv/bin/server", "its command", "{data}"),
        (_server("dot", "--repository", "."), "{repo}", "its argument '.'", "{repo}"),  # the bridge's cwd
        (
            _server("npx", command="npx"),
            "{repo}/src",
            "its working directory: its entry sets no cwd, so it runs in the bridge's",
            "{repo}/src",
        ),
    ],
)
def test_a_writable_mount_overlapping_where_a_host_side_server_works_is_found(
    repo: Path, server: ServerConfig, path: str, how: str, bridge_cwd: str
) -> None:
    fill = {"repo": repo, "data": repo.parent, "link": repo.parent / "link"}
    config = dataclasses.replace(
        server,
        command=server.command.format(**fill),
        args=tuple(arg.format(**fill) for arg in server.args),
        cwd=server.cwd.format(**fill) if server.cwd else None,
    )
    mounts = parse_mounts(f"{fill['link']}:/mnt/repo:rw")
    (found,) = shared_with_servers(mounts, [config], (), (), cwd=Path(bridge_cwd.format(**fill)))
    assert (found.mount, found.servers, found.path, found.accepted) == (
        mounts[0],
        (config.name,),
        Path(path.format(**fill)),
        False,
    )
    assert found.how == how.format(**fill)
    text = refusal([found])
    relation = {repo: "is", repo.parent: "lies in"}.get(found.path, "holds")
    assert text.startswith(f"MCP_BRIDGE_MOUNTS mounts {repo} writable at /mnt/repo, and it {relation} {found.path}, ")
    assert f"where the upstream server {config.name!r} works on the host ({found.how}): " in text
    assert "core.fsmonitor" in text and f"To fix it: mount it read-only ({repo}:/mnt/repo:ro)" in text
    assert f"add {repo}/.git:/mnt/repo/.git:ro) and list {repo} in MCP_BRIDGE_MOUNTS_SHARED" in text


def test_roots_count_for_host_side_servers_and_remote_servers_ro_mounts_and_neighbours_do_not(repo: Path) -> None:
    data = repo.parent
    rw, ro = parse_mounts(f"{repo}:/mnt/repo:rw,{data}/data:/mnt/data")
    remote = ServerConfig("web", "web", "http", "test", url=f"https://example.com{repo}")
    beside = _server("beside", f"{repo}x", f"--out={data}/data", "src", "--repository")  # src: not in the bridge's cwd
    assert shared_with_servers((rw, ro), [remote, beside], (), (), cwd=data) == []  # a bridge started above it
    assert shared_with_servers((rw,), [remote], (repo / "src",), (), cwd=data) == []  # no host-side server
    (found,) = shared_with_servers((rw,), [remote, beside, _server("b")], (repo / "src",), (), cwd=data)
    assert found.servers == ("beside", "b") and found.path == repo / "src"
    assert found.how == "a root the bridge gives upstream servers (MCP_BRIDGE_ROOTS)"
    assert "where the upstream server 'beside', 'b' works" in refusal([found])


def test_a_directory_listed_as_shared_is_kept_and_marked(repo: Path) -> None:
    mounts = parse_mounts(f"{repo}:/mnt/repo:rw")
    (found,) = shared_with_servers(mounts, [_server("git", str(repo))], (), (repo,), cwd=repo)
    assert found.accepted and refusal([found]) == ""
    settings = Settings.load(
        env={
            "MCP_BRIDGE_MOUNTS": f"{repo.parent}/link:/mnt/repo:rw,{repo}/src:/mnt/repo/src:ro",
            "MCP_BRIDGE_MOUNTS_SHARED": f" {repo.parent}/link/ ,",
            "MCP_BRIDGE_STATE_DIR": str(repo.parent / "state"),
        }
    )
    assert settings.mounts_shared == (repo,)
    file = repo.parent / "settings.toml"
    file.write_text(f'mounts = ["{repo}:/mnt/repo:rw"]\nmounts_shared = ["{repo}"]\n')
    assert Settings.load(env={}, settings_file=file).mounts_shared == (repo,)
    bad = {
        "relative": ("repo", "'repo' is not valid: expected absolute host directories of :rw mounts"),
        "read-only": (f"{repo}/src", "is not the host directory of a :rw mount in MCP_BRIDGE_MOUNTS"),
    }
    for value, complaint in bad.values():
        env = {
            "MCP_BRIDGE_MOUNTS": f"{repo}:/mnt/repo:rw,{repo}/src:/mnt/repo/src:ro",
            "MCP_BRIDGE_MOUNTS_SHARED": value,
        }
        with pytest.raises(SettingsError, match=re.escape(complaint)):
            Settings.load(env=env)
