"""MCP_BRIDGE_MOUNTS as pure logic: parsing, the refusals and their messages, the cross-checks with other settings,
the mode-bit access check doctor uses, the backends' arguments and the capability summary. No sandbox needed: the
real sandboxes are in tests/sandbox/test_mounts_in_sandboxes.py."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from mcp_codemode.errors import SettingsError
from mcp_codemode.mounts import Mount, MountError, access_problem, parse_mounts
from mcp_codemode.runs.summary import capability_summary
from mcp_codemode.sandbox.bubblewrap import BubblewrapBackend
from mcp_codemode.sandbox.container import ContainerBackend
from mcp_codemode.settings import Settings


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
