"""The state directory's mode does not depend on the umask, and a staged worker another user could have written is
never what a sandbox boots.

``login``, run first, once made the state directory with ``mkdir -p``: under umask 000 it (and the parents it made)
came out world-writable, and the staged guest is trusted by its name, so another local user could plant
``guest/<digest>`` and have their code run in every sandbox, beside the relay to the user's servers.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from mcp.shared.auth import OAuthToken

from mcp_codemode.runs.bridge import Bridge, RunRequest
from mcp_codemode.runs.saved_tools import SavedToolStore
from mcp_codemode.sandbox.bubblewrap import BubblewrapBackend
from mcp_codemode.sandbox.container import ContainerBackend
from mcp_codemode.sandbox.staged_trust import UntrustedStaging
from mcp_codemode.sandbox.staging import stage_guest
from mcp_codemode.session_keys import SessionKey
from mcp_codemode.upstream.model import ServerConfig
from mcp_codemode.upstream.servers.oauth import StoredSignIn
from mcp_codemode.upstream.servers.sign_ins import FileSignIns, sign_in_key
from tests.support.backends import SANDBOX_UID, fail_unless, require_usable, sandbox_settings

PLANTED = "import os\nopen('/tmp/planted-by-another-user', 'w').close()\n"


@contextlib.contextmanager
def umask(value: int) -> Iterator[None]:
    old = os.umask(value)
    try:
        yield
    finally:
        os.umask(old)


def mode_of(path: Path) -> int:
    return stat.S_IMODE(path.lstat().st_mode)


def sign_in_stores_tokens(state: Path) -> None:
    """What ``mcp-codemode login`` does to the disk once the sign-in succeeds."""
    config = ServerConfig(name="remote", alias="remote", transport="http", url="https://example.invalid/mcp",
                          source="test")  # fmt: skip
    stored = StoredSignIn(FileSignIns(state / "oauth"), sign_in_key(config))
    asyncio.run(stored.set_tokens(OAuthToken(access_token="abcd", token_type="Bearer")))


CREATORS: dict[str, Callable[[Path], object]] = {
    "login": sign_in_stores_tokens,
    "bridge staging": lambda state: stage_guest(state, SANDBOX_UID, SANDBOX_UID),
    "saved tool": lambda state: SavedToolStore(state / "saved-tools").save("owner", "tool", "def tool():\n    pass\n"),
}


@pytest.mark.parametrize("creator", list(CREATORS))
def test_whatever_creates_the_state_dir_makes_it_0711_under_umask_000(tmp_path: Path, creator: str) -> None:
    state = tmp_path / "missing" / "parent" / "state"
    with umask(0):
        CREATORS[creator](state)
    assert mode_of(state) == 0o711, f"{creator} made the state directory {mode_of(state):04o}"
    for parent in (tmp_path / "missing", tmp_path / "missing" / "parent"):
        assert mode_of(parent) == 0o755, f"{creator} made the missing parent {parent} {mode_of(parent):04o}"
    for private in ("oauth", "saved-tools"):
        if (state / private).exists():
            assert not mode_of(state / private) & 0o022


def needs_root() -> None:
    fail_unless(os.geteuid() == 0, "only root can give a planted directory to another uid")


def plant(state: Path, how: str) -> Path:
    """Pre-place the worker the bridge would stage in ``state``, with code of 'another user' in boot.py."""
    real = stage_guest(state.parent / "reference", SANDBOX_UID, SANDBOX_UID)
    target = state / "guest" / real.name
    shutil.copytree(real, target)
    boot = target / "boot.py"
    boot.write_text(PLANTED + boot.read_text())
    if how == "owned by another uid":
        for path in [state / "guest", *(state / "guest").rglob("*")]:
            os.chown(path, SANDBOX_UID, SANDBOX_UID)
    elif how == "guest/ of another uid":
        os.chown(state / "guest", SANDBOX_UID, SANDBOX_UID)
    elif how == "a group-writable file":
        boot.chmod(0o664)
    else:
        assert how == "a world-writable folder"
        (target / "mcp").chmod(0o777)
    return target


HOW = ["owned by another uid", "guest/ of another uid", "a group-writable file", "a world-writable folder"]


@pytest.mark.parametrize("how", HOW)
def test_a_planted_guest_is_set_aside_and_staged_afresh(tmp_path: Path, how: str) -> None:
    needs_root()
    state = tmp_path / "state"
    state.mkdir(mode=0o711)
    planted = plant(state, how)
    staged = stage_guest(state, SANDBOX_UID, SANDBOX_UID)
    assert staged == planted  # the same name, but now the bridge's own files
    assert "planted-by-another-user" not in (staged / "boot.py").read_text()
    assert (staged.parent.stat().st_uid, staged.stat().st_uid) == (0, 0)
    assert not [path for path in staged.rglob("*") if path.lstat().st_mode & 0o022]
    aside = [path for path in [*state.iterdir(), *(state / "guest").iterdir()] if ".untrusted-" in path.name]
    assert len(aside) == 1, "what was planted is kept aside for the user to look at, not deleted"


def test_a_state_dir_others_may_write_is_refused_with_the_fix(tmp_path: Path) -> None:
    state = tmp_path / "state"
    state.mkdir()
    state.chmod(0o777)
    with pytest.raises(UntrustedStaging) as refused:
        stage_guest(state, SANDBOX_UID, SANDBOX_UID)
    assert f"the state directory {state} is writable by users other than its owner (mode 0777)" in str(refused.value)
    assert f"chmod 0711 {state}" in refused.value.fix


@pytest.mark.backend
def test_a_planted_boot_file_never_runs_in_a_sandbox() -> None:
    """The real thing: a bubblewrap session started over a planted worker; its boot code would leave a marker."""
    needs_root()
    require_usable(BubblewrapBackend(sandbox_settings()))
    base = Path(tempfile.mkdtemp(prefix="mcp-codemode-planted-"))  # pytest's tmp_path keeps the sandbox uid out
    try:
        base.chmod(0o711)
        state = base / "state"
        state.mkdir(mode=0o711)
        plant(state, "owned by another uid")
        settings = sandbox_settings(runtime="bubblewrap", state_dir=state)

        async def main() -> str:
            async with Bridge(settings) as bridge:
                code = "import os; print(os.path.exists('/tmp/planted-by-another-user'))"
                return (await bridge.run(RunRequest(code), SessionKey.cli("planted"))).stdout

        assert asyncio.run(main()) == "False\n", "the planted boot file ran in the sandbox"
    finally:
        shutil.rmtree(base, ignore_errors=True)


def test_a_planted_gvisor_seccomp_profile_is_set_aside_and_written_afresh(tmp_path: Path) -> None:
    """gVisor's copy of the seccomp profile sits beside the staged worker, found by name the same way."""
    needs_root()
    state = tmp_path / "state"
    state.mkdir(mode=0o711)
    backend = ContainerBackend(sandbox_settings(state_dir=state, oci_runtime="runsc"), "podman")
    staged = Path(backend._guest_dir)
    planted = staged.with_name(staged.name + "-seccomp-gvisor.json")
    planted.write_text('{"defaultAction": "SCMP_ACT_ALLOW", "syscalls": []}')  # denies nothing
    os.chown(planted, SANDBOX_UID, SANDBOX_UID)
    used = Path(backend._seccomp_file)
    assert used == planted and used.stat().st_uid == 0
    assert json.loads(used.read_text())["syscalls"], "the planted profile, which denies nothing, was used"
    assert [path.name for path in staged.parent.iterdir() if ".untrusted-" in path.name]
