"""`mcp-codemode image build` and `packages add|remove|list`, as a user runs them (through the CLI's ``main``, in
this process: tests/support/cli_here.py), on real sandboxes.

Packages come from PyPI (a small pure-Python one, toolz, which Debian's /usr/bin/python3 here does not have, so an
import that works proves the sandbox sees what was added). The podman half builds its own image tag from the
repository's cached rootfs tarball and removes it afterwards: the shared `mcp-codemode-sandbox:bookworm` is never
touched. Pure rules (what a requirement may be, how lists merge, sudo in fix texts) are tested without sandboxes.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from mcp_codemode.provision import requirements
from mcp_codemode.provision.image import remove_if_nameless
from mcp_codemode.provision.installer import Installer, TargetPython, uv_platform
from mcp_codemode.provision.sandbox_env import new_env_dir
from mcp_codemode.provision.steps import ProvisionError, hint
from tests.support.backends import fail_unless
from tests.support.cli_here import cli_here
from tests.support.inspector import BRIDGE

REPO = Path(__file__).resolve().parents[2]
CACHE = REPO / ".cache"
UV = CACHE / "uv" / "bin" / "uv"
PACKAGE = "toolz"
SHARED_IMAGE = "mcp-codemode-sandbox:bookworm"


# ------------------------------------------------------------------------------------------------- pure rules


@pytest.mark.parametrize(
    "spec",
    ["--index-url=https://evil.example/simple", "-e .", "./local/dir", "https://example.com/x.whl", "pkg; rm -rf /",
     "", "pandas @ https://example.com/p.whl", "-r other.txt"],
)  # fmt: skip
def test_anything_but_a_plain_requirement_is_refused(spec: str):
    with pytest.raises(ProvisionError, match="not a package requirement"):
        requirements.check([spec])


@pytest.mark.parametrize("spec", ["pandas", "toolz==1.0.0", "requests[socks]>=2.31", "a.b_c-d ~= 1.2, != 1.3"])
def test_names_extras_and_versions_are_accepted(spec: str):
    assert requirements.check([f" {spec} "]) == [spec]


def test_adding_replaces_the_same_name_and_removing_names_only_what_was_added():
    current = requirements.merge(["pandas", "Toolz==0.12"], ["toolz>=1", "six"])
    assert current == ["pandas", "toolz>=1", "six"]
    assert requirements.without(current, ["TOOLZ", "Pandas"]) == ["six"]
    with pytest.raises(ProvisionError, match=r"numpy was not added .*added: pandas, toolz>=1, six"):
        requirements.without(current, ["numpy"])


def test_installs_for_the_image_target_its_python_not_the_hosts():
    python = TargetPython("3.11", "x86_64", "2.36")
    uv = Installer("uv", ("uv",), "0.13.9").into_target(Path("/t"), Path("/r.txt"), python)
    pip = Installer("pip", ("py", "-m", "pip"), "24").into_target(Path("/t"), Path("/r.txt"), python)
    assert uv[uv.index("--python-version") + 1] == "3.11"
    assert uv[uv.index("--python-platform") + 1] == "x86_64-manylinux_2_36"
    assert pip[pip.index("--platform") + 1] == "manylinux_2_36_x86_64"
    assert "--only-binary=:all:" in pip
    assert uv_platform(TargetPython("3.13", "aarch64", "2.41")) == "aarch64-manylinux_2_40"
    with pytest.raises(ProvisionError, match="glibc"):
        uv_platform(TargetPython("3.12", "x86_64", ""))


def test_every_add_builds_in_a_directory_of_its_own_even_twice_in_one_second(tmp_path: Path):
    """A failed add deletes the directory it built in: were that the current environment's (the same second, the
    same process), every sandbox would lose its packages while the link still pointed there."""
    made = [new_env_dir(tmp_path) for _ in range(20)]  # well within one second, in one process
    assert len(set(made)) == 20 and all(p.is_dir() and not any(p.iterdir()) for p in made)
    assert all(p.parent == tmp_path and p.name.startswith("env-") for p in made)


def test_failed_installs_are_explained_in_one_sentence():
    assert "not on the package index" in hint(["  cause: Because nope was not found in the package registry"])
    assert "could not reach the package index" in hint(["error: Failed to fetch: `https://pypi.org/simple/six/`"])
    assert hint(["something else entirely"]) == ""


# ------------------------------------------------------------------------------------------------- real runs


@pytest.fixture
def uv_path() -> Iterator[str]:
    """A PATH with uv on it (and nothing else from uv's own venv, whose python must not shadow the system's)."""
    fail_unless(UV.is_file(), f"{UV} is missing: run scripts/setup.sh")
    folder = Path(tempfile.mkdtemp(prefix="mcp-codemode-uv-"))
    (folder / "uv").symlink_to(UV)
    try:
        yield f"{folder}:{os.environ['PATH']}"
    finally:
        shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def state_dir() -> Iterator[Path]:
    """A state directory outside /tmp: the sandbox mounts its own /tmp, which would hide an environment there."""
    base = Path(tempfile.mkdtemp(prefix="mcp-codemode-packages-", dir="/var/tmp"))
    os.chmod(base, 0o711)
    try:
        yield base / "state"
    finally:
        shutil.rmtree(base, ignore_errors=True)


def cli(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The command, run by the CLI's ``main`` in this process (tests/support/cli_here.py says why that is enough)."""
    return cli_here(env, *args)


@pytest.mark.backend
def test_packages_add_reaches_bubblewrap_sandboxes_and_a_failed_add_keeps_the_working_environment(
    uv_path: str, state_dir: Path
):
    fail_unless(shutil.which("bwrap") is not None, "bwrap is not installed")
    env = {**os.environ, "PATH": uv_path, "MCP_BRIDGE_STATE_DIR": str(state_dir)}
    env.pop("MCP_BRIDGE_SANDBOX_PYTHON", None)
    probe = f"import {PACKAGE}, sys; print({PACKAGE}.__name__, sys.prefix)"

    before = cli("run", "--backend", "bubblewrap", "-c", probe, env=env)
    assert before.returncode == 1 and f"No module named '{PACKAGE}'" in before.stderr

    added = cli("packages", "add", PACKAGE, "--backend", "bubblewrap", env=env)
    assert added.returncode == 0, added.stderr
    assert f"installing {PACKAGE} with uv" in added.stderr, "the install's progress is shown"
    assert f"bubblewrap sandboxes now have: {PACKAGE} " in added.stdout
    inside = cli("run", "--backend", "bubblewrap", "-c", probe, env=env)
    assert inside.returncode == 0, inside.stderr
    assert inside.stdout == f"{PACKAGE} {state_dir / 'sandbox-env'}\n"
    target = os.readlink(state_dir / "sandbox-env")

    broken = cli("packages", "add", "mcp-codemode-no-such-package-zz9", "--backend", "bubblewrap", env=env)
    assert broken.returncode == 125
    assert "not on the package index" in broken.stderr and "was not changed" in broken.stderr
    assert os.readlink(state_dir / "sandbox-env") == target
    again = subprocess.run([str(BRIDGE), "run", "--backend", "bubblewrap", "-c", probe],
                           env=env, capture_output=True, text=True, timeout=120, check=False)  # fmt: skip
    assert again.returncode == 0, again.stderr

    listed = cli("packages", "list", "--backend", "bubblewrap", env=env)
    assert listed.returncode == 0 and f"added:     {PACKAGE}" in listed.stdout

    removed = cli("packages", "remove", PACKAGE, "--backend", "bwrap", env=env)
    assert removed.returncode == 0, removed.stderr
    assert not (state_dir / "sandbox-env").exists()
    after = cli("run", "--backend", "bubblewrap", "-c", probe, env=env)
    assert after.returncode == 1 and f"No module named '{PACKAGE}'" in after.stderr


@pytest.mark.backend
def test_a_hand_made_sandbox_env_is_never_replaced(uv_path: str, state_dir: Path):
    fail_unless(shutil.which("bwrap") is not None, "bwrap is not installed")
    hand_made = state_dir / "sandbox-env"
    hand_made.mkdir(parents=True)
    (hand_made / "mine").write_text("keep me")
    env = {**os.environ, "PATH": uv_path, "MCP_BRIDGE_STATE_DIR": str(state_dir)}
    done = cli("packages", "add", PACKAGE, "--backend", "bubblewrap", env=env)
    assert done.returncode == 125
    assert "did not make" in done.stderr and "mv " in done.stderr
    assert (hand_made / "mine").read_text() == "keep me"


@pytest.mark.backend
def test_options_given_as_packages_are_refused_before_anything_runs(state_dir: Path):
    env = {**os.environ, "MCP_BRIDGE_STATE_DIR": str(state_dir)}
    done = cli("packages", "add", "--backend", "bubblewrap", "--", "--index-url=http://127.0.0.1:9/simple", env=env)
    assert done.returncode == 125
    assert "is not a package requirement" in done.stderr
    assert not state_dir.exists()


def _image_ids(tag: str) -> list[str]:
    done = subprocess.run(["podman", "image", "inspect", "--format", "{{.Id}}", tag], capture_output=True, text=True)
    return done.stdout.split() if done.returncode == 0 else []


@pytest.fixture
def test_image() -> Iterator[str]:
    """A tag of our own; afterwards it is removed, and so is any image this test left without a name.

    An import of the shared tarball has the same id as the shared `mcp-codemode-sandbox:bookworm`: `rmi ID` would
    delete that image (it refuses only an id with several names), so an id is removed only once it has none.
    """
    fail_unless(shutil.which("podman") is not None, "podman is not installed")
    fail_unless((CACHE / "rootfs-bookworm.tar").is_file(), "the cached rootfs .cache/rootfs-bookworm.tar is missing")
    tag = f"mcp-codemode-sandbox:test-packages-{os.getpid()}"
    shared = _image_ids(SHARED_IMAGE)
    try:
        yield tag
    finally:
        for image_id in _image_ids(tag):
            subprocess.run(["podman", "rmi", tag], capture_output=True, check=False)
            remove_if_nameless("podman", image_id)
        assert _image_ids(SHARED_IMAGE) == shared, f"{SHARED_IMAGE}, which others use, must be left as it was"


@pytest.mark.backend
def test_image_build_then_packages_add_reaches_podman_sandboxes(uv_path: str, state_dir: Path, test_image: str):
    env = {**os.environ, "PATH": uv_path, "MCP_BRIDGE_STATE_DIR": str(state_dir), "MCP_BRIDGE_IMAGE": test_image}
    missing = cli("run", "--backend", "podman", "-c", "1", env=env)
    assert missing.returncode == 125
    assert f"mcp-codemode image build --tag {test_image} --engine podman" in missing.stderr

    built = cli("image", "build", "--tag", test_image, "--cache-dir", str(CACHE), env=env)
    assert built.returncode == 0, built.stderr
    assert "using the cached root filesystem" in built.stderr
    assert _image_ids(test_image)
    again = cli("image", "build", "--tag", test_image, "--cache-dir", str(CACHE), env=env)
    assert "already present" in again.stderr

    probe = f"import {PACKAGE}; print({PACKAGE}.__file__)"
    added = cli("packages", "add", PACKAGE, "--backend", "podman", env=env)
    assert added.returncode == 0, added.stderr
    assert "for Python 3.11 (x86_64" in added.stderr and "podman build" in added.stderr
    inside = cli("run", "--backend", "podman", "-c", probe, env=env)
    assert inside.returncode == 0, inside.stderr
    assert inside.stdout.startswith(f"/usr/local/lib/python3.11/dist-packages/{PACKAGE}/")

    broken = cli("packages", "add", "mcp-codemode-no-such-package-zz9", "--backend", "podman", env=env)
    assert broken.returncode == 125 and "was not changed" in broken.stderr
    assert cli("run", "--backend", "podman", "-c", probe, env=env).returncode == 0

    listed = cli("packages", "list", "--backend", "podman", "--json", env=env)
    assert f'"{PACKAGE}"' in listed.stdout

    removed = cli("packages", "remove", PACKAGE, "--backend", "podman", env=env)
    assert removed.returncode == 0, removed.stderr
    after = cli("run", "--backend", "podman", "-c", probe, env=env)
    assert after.returncode == 1 and f"No module named '{PACKAGE}'" in after.stderr


@pytest.mark.backend
def test_packages_for_a_backend_that_cannot_run_say_why(state_dir: Path):
    env = {**os.environ, "MCP_BRIDGE_STATE_DIR": str(state_dir), "MCP_BRIDGE_IMAGE": "mcp-codemode-no-such:image"}
    done = cli("packages", "add", PACKAGE, "--backend", "podman", env=env)
    assert done.returncode == 125
    assert "image mcp-codemode-no-such:image is not present" in done.stderr
    assert "mcp-codemode image build" in done.stderr
    docker = cli("packages", "add", PACKAGE, "--backend", "docker", env={**env, "PATH": "/nonexistent"})
    assert docker.returncode == 125 and "docker is not installed" in docker.stderr
