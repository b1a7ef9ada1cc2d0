"""A writable mount shared with a host-side upstream server: host code execution through the server (issue 30).

The attack: ``MCP_BRIDGE_MOUNTS`` mounts a git repository ``rw`` and ``mcp-server-git`` works on the same
repository. Sandboxed code appends ``core.fsmonitor`` to ``.git/config`` and calls ``git_status``; git, run by the
server on the host as the bridge's user, runs the command. The command here creates a marker file outside the
mount, so its presence is the proof that a host command ran. Each behaviour is one real bridge on bubblewrap with
the real ``mcp-server-git``:

- as configured, the bridge refuses the mount at start-up and runs no code, saying why and how to fix it;
- with the directory listed in ``MCP_BRIDGE_MOUNTS_SHARED`` and the repository's ``.git`` mounted read-only inside
  the writable mount (the fix the refusal names), the append fails with EROFS and no host command runs.
"""

from __future__ import annotations

import asyncio
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_codemode.errors import CodemodeError
from mcp_codemode.mounts import parse_mounts
from mcp_codemode.runs.bridge import Bridge, RunRequest
from mcp_codemode.session_keys import SessionKey
from mcp_codemode.upstream.model import Discovery
from tests.support import upstreams
from tests.support.cells import guest, private_state_dir
from tests.support.security import ATTEMPT, outcome, require_backend, target_settings

pytestmark = pytest.mark.backend

ATTACK = """
hook = '\\n[core]\\n\\tfsmonitor = "touch {marker}; false"\\n'
seen = {{'append': attempt(lambda: open('/mnt/repo/.git/config', 'a').write(hook))}}
seen['status'] = 'Repository status' in str(await mcp_git.git_status(repo_path={repo!r}))
report(seen)
"""


@pytest.fixture
def repo() -> Iterator[Path]:
    """A repository whose .git/config the sandbox uid may append to (mode 0666), so only the mount can refuse; the
    repository stays the bridge user's own, which git on the host trusts. The marker's place is beside it."""
    base = Path(tempfile.mkdtemp(prefix="mcp-shared-mount-"))
    try:
        base.chmod(0o755)
        upstreams.make_repo(base / "repo")
        (base / "repo" / ".git" / "config").chmod(0o666)
        yield base / "repo"
    finally:
        shutil.rmtree(base, ignore_errors=True)


def attack(repo: Path, mounts: str, **settings: object) -> tuple[dict[str, object] | str, bool]:
    """Run the attack in one bridge on bubblewrap; what the code reported (or the bridge's refusal), and whether
    the host command ran."""
    marker = repo.parent / "host-command-ran"
    code = guest(ATTEMPT + ATTACK.format(marker=marker, repo=str(repo)))
    with private_state_dir() as state:
        config = target_settings("bubblewrap", state, mounts=parse_mounts(mounts), **settings)
        require_backend("bubblewrap", config)

        async def main() -> dict[str, object] | str:
            async with Bridge(config, Discovery(servers=(upstreams.git(repo),))) as bridge:
                try:
                    result = await bridge.run(RunRequest(code), SessionKey.cli("attacker"))
                except CodemodeError as exc:
                    return str(exc)
                return outcome(result)

        seen = asyncio.run(main())
    return seen, marker.exists()


def test_a_writable_mount_of_the_git_servers_repository_is_refused_at_start_up(repo: Path) -> None:
    seen, ran = attack(repo, f"{repo}:/mnt/repo:rw")
    assert not ran, f"the sandbox ran a command on the host through mcp-server-git: {seen}"
    assert isinstance(seen, str), seen
    assert seen.startswith("The bridge runs no code: MCP_BRIDGE_MOUNTS mounts ")
    assert f"{repo} writable at /mnt/repo, and it is {repo}, where the upstream server 'git' works" in seen
    assert f"its argument '{repo}'" in seen and "core.fsmonitor" in seen
    assert f"{repo}/.git:/mnt/repo/.git:ro" in seen and f"list {repo} in MCP_BRIDGE_MOUNTS_SHARED" in seen
    assert "fsmonitor" not in (repo / ".git" / "config").read_text()


def test_shared_knowingly_with_git_read_only_the_hook_cannot_be_written(repo: Path) -> None:
    mounts = f"{repo}:/mnt/repo:rw,{repo}/.git:/mnt/repo/.git:ro"
    seen, ran = attack(repo, mounts, mounts_shared=(repo,))
    assert seen == {"append": "EROFS", "status": True}, seen
    assert not ran, "the sandbox ran a command on the host through mcp-server-git"
    assert "fsmonitor" not in (repo / ".git" / "config").read_text()
