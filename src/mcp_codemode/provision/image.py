"""Building the container image locally: a minimal Debian with python3, imported into podman or docker.

No registry is reachable on the machines this was made for (DESIGN.md §4), so the image is made from Debian's
packages and imported, never pulled. The slow part, bootstrapping Debian (20 s to a minute), produces a root
filesystem tarball that is cached (``<cache_dir>/rootfs-<suite>.tar``): a rebuild, for example after
``podman system reset``, only imports it again, in seconds.

Two bootstrappers, in this order:

* ``mmdebstrap``, which needs no root: ``--mode=unshare`` builds in a user namespace (the user needs subordinate
  ids in /etc/subuid, which ``adduser`` gives every new user). Measured here: 20 s, as an ordinary user.
* ``debootstrap``, which needs root (it chroots and creates device nodes): ``sudo`` is then the only way.

Either way the tree loses what a sandbox never needs (apt's caches and lists, docs, man pages, locales, logs), which
halves it, and gets a world-writable ``/workspace``.
"""

from __future__ import annotations

import dataclasses
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TextIO

from . import DEFAULT_MIRROR, DEFAULT_SUITE
from .steps import ProvisionError, say, stream

_STRIP = (
    "var/cache/apt/*", "var/lib/apt/lists/*", "usr/share/doc/*", "usr/share/man/*", "usr/share/locale/*", "var/log/*",
)  # fmt: skip
_MERGED_USR_HOOK = Path("/usr/share/mmdebstrap/hooks/merged-usr")
_TRIM = " ".join(f'"$1"/{path}' for path in _STRIP)
# Run by mmdebstrap with the finished tree as $1 (inside its user namespace in unshare mode).
_HOOKS = (f"rm -rf {_TRIM}", 'mkdir -p "$1/workspace" && chmod 1777 "$1/workspace"')


@dataclasses.dataclass(frozen=True)
class ImageBuild:
    image: str
    engine: str  # "podman" or "docker", for messages
    binary: str
    cache_dir: Path
    suite: str = DEFAULT_SUITE
    mirror: str = DEFAULT_MIRROR


def default_cache_dir(env: Mapping[str, str], is_root: bool) -> Path:
    """Where the rootfs tarball is kept: /var/cache for root, the XDG cache of an ordinary user."""
    if is_root:
        return Path("/var/cache/mcp-codemode")
    base = env.get("XDG_CACHE_HOME") or str(Path(env.get("HOME", "~")).expanduser() / ".cache")
    return Path(base) / "mcp-codemode"


def image_id(binary: str, image: str) -> str | None:
    """The image's id in the engine's store, or None when it is not there."""
    try:
        done = subprocess.run(
            [binary, "image", "inspect", "--format", "{{.Id}}", image],
            capture_output=True, text=True, timeout=60, check=False,
        )  # fmt: skip
    except (OSError, subprocess.TimeoutExpired):
        return None
    return done.stdout.strip() or None if done.returncode == 0 else None


def tarball_path(build: ImageBuild) -> Path:
    return build.cache_dir / f"rootfs-{build.suite}.tar"


def rootfs_tarball(build: ImageBuild, out: TextIO) -> Path:
    """The cached root filesystem tarball, bootstrapped first when it is missing."""
    tarball = tarball_path(build)
    if tarball.is_file() and tarball.stat().st_size > 0:
        say(out, f"using the cached root filesystem {tarball} (delete it to bootstrap Debian again)")
        return tarball
    try:
        build.cache_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise ProvisionError(f"cannot create the cache directory {build.cache_dir}: {exc.strerror}") from None
    is_root = os.geteuid() == 0
    mmdebstrap, debootstrap = shutil.which("mmdebstrap"), shutil.which("debootstrap")
    if mmdebstrap is not None and (is_root or _has_subids()):
        _mmdebstrap(build, mmdebstrap, is_root, tarball, out)
    elif debootstrap is not None and is_root:
        _debootstrap(build, debootstrap, tarball, out)
    else:
        raise ProvisionError(_no_bootstrapper(build, mmdebstrap is not None, debootstrap is not None))
    return tarball


def _no_bootstrapper(build: ImageBuild, have_mmdebstrap: bool, have_debootstrap: bool) -> str:
    where = f"{tarball_path(build)} is not there yet, so Debian must be bootstrapped"
    if have_mmdebstrap:
        user = pwd.getpwuid(os.geteuid()).pw_name
        return (
            f"{where}: mmdebstrap can do it without root, but user {user} has no subordinate ids; add them with "
            f"`sudo usermod --add-subuids 100000-165535 --add-subgids 100000-165535 {user}` and run this again"
        )
    if have_debootstrap:
        return (
            f"{where}: debootstrap needs root. Either install mmdebstrap, which does not "
            "(sudo apt-get install mmdebstrap), or bootstrap once as root into this cache and import as yourself: "
            f"sudo $(command -v mcp-codemode) image build --rootfs-only --cache-dir {build.cache_dir}"
        )
    return f"{where}: install mmdebstrap, which needs no root (sudo apt-get install mmdebstrap), and run this again"


def _has_subids() -> bool:
    """Whether this user has subordinate uids, which mmdebstrap's unshare mode maps the tree's owners to."""
    user = pwd.getpwuid(os.geteuid()).pw_name
    try:
        lines = Path("/etc/subuid").read_text(encoding="utf-8").splitlines()
    except OSError:
        return False
    return any(line.split(":")[0] in (user, str(os.geteuid())) for line in lines)


def _mmdebstrap(build: ImageBuild, binary: str, is_root: bool, tarball: Path, out: TextIO) -> None:
    mode = "root" if is_root else "unshare"
    say(out, f"bootstrapping Debian {build.suite} with mmdebstrap ({mode} mode, about 20-60 s)")
    partial = _partial(tarball)
    # The merged-usr hook sets /usr up as debootstrap does; without it apt installs usrmerge, and perl with it
    # (170 MB instead of 120 MB).
    argv = [binary, f"--mode={mode}", "--variant=minbase", "--include=python3"]
    if _MERGED_USR_HOOK.is_dir():
        argv += [f"--hook-dir={_MERGED_USR_HOOK}"]
    argv += [f"--customize-hook={hook}" for hook in _HOOKS]
    argv += [build.suite, str(partial), build.mirror]
    _bootstrap(argv, partial, tarball, out, build.cache_dir / "mmdebstrap.log")


def _debootstrap(build: ImageBuild, binary: str, tarball: Path, out: TextIO) -> None:
    say(out, f"bootstrapping Debian {build.suite} with debootstrap (about a minute)")
    root = Path(tempfile.mkdtemp(prefix="rootfs.", dir=build.cache_dir))
    try:
        log = build.cache_dir / "debootstrap.log"
        ran = stream([binary, "--variant=minbase", "--include=python3", build.suite, str(root), build.mirror], out,
                     log=log)  # fmt: skip
        if not ran.ok:
            raise ProvisionError(f"debootstrap failed (exit status {ran.returncode}); its log is {log}")
        for pattern in _STRIP:
            for path in root.glob(pattern):
                shutil.rmtree(path) if path.is_dir() and not path.is_symlink() else path.unlink()
        (root / "workspace").mkdir(exist_ok=True)
        os.chmod(root / "workspace", 0o1777)  # noqa: S103 - the sandbox's working directory, as /tmp
        partial = _partial(tarball)
        _bootstrap(["tar", "-C", str(root), "-cf", str(partial), "."], partial, tarball, out, None)
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _partial(tarball: Path) -> Path:
    """Where a tarball is written until it is whole; mmdebstrap picks its output format by this name's suffix."""
    return tarball.with_name(f".{tarball.stem}.partial.tar")


def _bootstrap(argv: list[str], partial: Path, tarball: Path, out: TextIO, log: Path | None) -> None:
    """Run a step that writes ``partial``; only a finished one becomes the cached tarball."""
    try:
        ran = stream(argv, out, log=log)
        if not ran.ok:
            where = f"; its log is {log}" if log is not None else ""
            raise ProvisionError(f"{Path(argv[0]).name} failed (exit status {ran.returncode}){where}")
        os.replace(partial, tarball)
    finally:
        if partial.is_dir():
            shutil.rmtree(partial, ignore_errors=True)
        elif partial.exists():
            partial.unlink()


def import_rootfs(build: ImageBuild, tarball: Path, out: TextIO) -> str:
    """Import the tarball as a new image with no name yet; returns its id."""
    say(out, f"importing {tarball} into {build.engine}")
    argv = [build.binary, "import", "--change", 'CMD ["/usr/bin/python3"]', "--change", "WORKDIR /workspace"]
    try:
        done = subprocess.run([*argv, str(tarball)], capture_output=True, text=True, timeout=1800, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ProvisionError(f"{build.engine} import failed: {exc}") from None
    if done.returncode != 0:
        raise ProvisionError(f"{build.engine} import failed: {done.stderr.strip()}")
    return done.stdout.strip().splitlines()[-1].removeprefix("sha256:")


def tag(binary: str, image_ref: str, name: str) -> None:
    done = subprocess.run([binary, "tag", image_ref, name], capture_output=True, text=True, timeout=60, check=False)
    if done.returncode != 0:
        raise ProvisionError(f"cannot name the image {name}: {done.stderr.strip()}")


def remove_if_nameless(binary: str, image_ref: str) -> bool:
    """Delete an image we left without a name, and nothing else.

    ``rmi ID`` deletes an image that still carries one name (podman and docker refuse only several), and an
    import of the same tarball can share its id with an image someone else named: so an image is deleted only
    when it has no name at all. One still used by a container, or under another image, is refused by the engine.
    """
    done = subprocess.run(
        [binary, "image", "inspect", "--format", "{{json .RepoTags}}", image_ref],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    if done.returncode != 0 or done.stdout.strip() not in ("[]", "null"):
        return False
    removed = subprocess.run([binary, "rmi", image_ref], capture_output=True, timeout=120, check=False)
    return removed.returncode == 0
