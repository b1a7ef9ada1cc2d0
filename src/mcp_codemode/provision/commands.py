"""The ``image`` and ``packages`` commands: what the CLI runs, with progress on one stream and results on another.

Progress (our lines and the tools' own output) goes to ``progress`` (standard error), results to ``out`` (standard
output), so ``packages list --json`` stays machine-readable while a long install stays visible.

Which backend ``packages`` changes: the one named with ``--backend``, else ``MCP_BRIDGE_RUNTIME`` when it names
one, else the one ``auto`` would choose here. bubblewrap gets the state directory's sandbox environment
(``sandbox_env``), podman and docker a layer on the configured image (``image_packages``).
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, TextIO

from ..errors import SandboxUnavailable
from ..sandbox.bubblewrap import BubblewrapBackend
from ..sandbox.container import ContainerBackend
from ..sandbox.select import choose_backend
from ..settings import Settings
from . import BACKENDS, image_packages, requirements, sandbox_env
from . import image as image_build
from .installer import find_installer
from .steps import ProvisionError, say


@dataclasses.dataclass(frozen=True)
class ImageOptions:
    tag: str | None
    engine: str | None
    cache_dir: Path | None
    suite: str
    mirror: str
    force: bool
    rootfs_only: bool


def build_image(settings: Settings, options: ImageOptions, env: Mapping[str, str], progress: TextIO) -> int:
    """``mcp-codemode image build``: the image from the cached (or freshly bootstrapped) Debian tree."""
    engine = options.engine or (settings.runtime if settings.runtime in ("podman", "docker") else "podman")
    cache_dir = options.cache_dir or image_build.default_cache_dir(env, os.geteuid() == 0)
    tag = options.tag or settings.image
    binary = shutil.which(engine) or ""
    recipe = image_build.ImageBuild(tag, engine, binary, cache_dir, options.suite, options.mirror)
    if options.rootfs_only:
        tarball = image_build.rootfs_tarball(recipe, progress)
        say(progress, f"root filesystem ready: {tarball}")
        return 0
    if not binary:
        raise ProvisionError(f"{engine} is not installed; install it ({_sudo()}apt-get install {engine})")
    old_id = image_build.image_id(binary, tag)
    if old_id and not options.force:
        say(progress, f"{tag} is already present in {engine} (--force rebuilds it and keeps its packages)")
        return 0
    target = _engine(settings, engine, check_image=False)
    carried = image_packages.recorded(target, tag) if old_id else None
    tarball = image_build.rootfs_tarball(recipe, progress)
    new_id = image_build.import_rootfs(recipe, tarball, progress)
    if carried is not None and carried.requested:
        say(progress, f"carrying the image's packages over: {', '.join(carried.requested)}")
        try:
            image_packages.rebuild(target, tag, carried.requested, find_installer(sys.executable), progress, new_id)
        except BaseException:
            image_build.remove_if_nameless(binary, new_id)
            raise
        if carried.base and carried.base != new_id:
            image_build.remove_if_nameless(binary, carried.base)
    else:
        image_build.tag(binary, new_id, tag)
        if old_id and old_id != new_id:
            image_build.remove_if_nameless(binary, old_id)
    say(progress, f"{tag} ready in {engine} (image {new_id[:12]})")
    return 0


def add(settings: Settings, backend: str | None, specs: Sequence[str], out: TextIO, progress: TextIO) -> int:
    checked = requirements.check(specs)
    return _change(settings, backend, lambda current: requirements.merge(current, checked), out, progress)


def remove(settings: Settings, backend: str | None, names: Sequence[str], out: TextIO, progress: TextIO) -> int:
    return _change(settings, backend, lambda current: requirements.without(current, names), out, progress)


def _change(
    settings: Settings,
    backend: str | None,
    change: Callable[[list[str]], list[str]],
    out: TextIO,
    progress: TextIO,
) -> int:
    name = target_backend(settings, backend, progress)
    if name == "bubblewrap":
        _check_bubblewrap(settings)
        wanted = change(sandbox_env.requested(settings.state_dir))
        installer = find_installer(sys.executable) if wanted else None
        env = sandbox_env.rebuild(
            settings.state_dir, wanted, installer, progress, lambda python: _check_env(settings, python)
        )
        if env is not None:
            listed = ", ".join(f"{n} {v}" for n, v in sandbox_env.installed(env))
            print(f"bubblewrap sandboxes now have: {listed}", file=out)
            print(f"(environment {settings.state_dir / sandbox_env.ENV_LINK} -> {env}; sandboxes already running "
                  "keep what they started with)", file=out)  # fmt: skip
        else:
            print(f"bubblewrap sandboxes have no added packages ({sandbox_env.BASE_PYTHON})", file=out)
        return 0
    engine = _engine(settings, name, check_image=True)
    now = image_packages.recorded(engine, settings.image)
    wanted = change(now.requested if now is not None else [])
    installer = find_installer(sys.executable) if wanted else None
    result = image_packages.rebuild(engine, settings.image, wanted, installer, progress)
    if result.requested:
        listed = ", ".join(f"{n} {v}" for n, v in result.installed)
        print(f"{name} sandboxes ({settings.image}) now have: {listed}", file=out)
    else:
        print(f"{name} sandboxes ({settings.image}) have no added packages", file=out)
    return 0


def list_packages(settings: Settings, backend: str | None, as_json: bool, out: TextIO) -> int:
    """``packages list``: per backend, what was asked for and what is installed (with versions)."""
    names = [_canonical(backend)] if backend else list(BACKENDS)
    report: dict[str, Any] = {}
    for name in names:
        if name == "bubblewrap":
            env = sandbox_env.current_env(settings.state_dir)
            report[name] = {
                "environment": str(env) if env else None,
                "requested": sandbox_env.requested(settings.state_dir),
                "installed": [list(item) for item in sandbox_env.installed(env)] if env else [],
            }
            continue
        binary = shutil.which(name)
        found = image_packages.recorded(image_packages.Engine(name, binary), settings.image) if binary else None
        if found is None:
            if backend:
                report[name] = {"image": settings.image, "present": False, "requested": [], "installed": []}
            continue
        report[name] = {
            "image": settings.image,
            "present": True,
            "requested": found.requested,
            "installed": [list(item) for item in found.installed],
        }
    if as_json:
        print(json.dumps(report, indent=2), file=out)
        return 0
    for name, entry in report.items():
        where = entry.get("environment") or entry.get("image") or f"{sandbox_env.BASE_PYTHON}, no environment"
        if name != "bubblewrap" and not entry.get("present", True):
            where += " (not present: build it with `mcp-codemode image build`)"
        print(f"{name}: {where}", file=out)
        print(f"  added:     {', '.join(entry['requested']) or 'none'}", file=out)
        if entry["installed"]:
            print(f"  installed: {', '.join(f'{n} {v}' for n, v in entry['installed'])}", file=out)
    return 0


def target_backend(settings: Settings, backend: str | None, progress: TextIO) -> str:
    """The backend a change applies to: named, configured, or the one ``auto`` picks here (said aloud)."""
    if backend:
        return _canonical(backend)
    if settings.runtime != "auto":
        return settings.runtime
    try:
        chosen = choose_backend(settings).backend.name
    except SandboxUnavailable as exc:
        raise ProvisionError(f"no sandbox backend works here, so name one with --backend: {exc}") from None
    say(progress, f"changing the {chosen} sandboxes (the backend auto picks here; --backend names another)")
    return chosen


def _canonical(name: str) -> str:
    return "bubblewrap" if name == "bwrap" else name


def _check_bubblewrap(settings: Settings) -> None:
    """The environment is useless where bubblewrap would not use it: say so before building anything."""
    ours = sandbox_env.env_python(settings.state_dir)
    if settings.sandbox_python is not None and settings.sandbox_python != ours:
        where = settings.sources.get("sandbox_python", "settings")
        raise ProvisionError(
            f"sandbox_python is set to {settings.sandbox_python} ({where}), so bubblewrap would not use the "
            f"environment `packages` manages ({ours}); unset it, or install into that Python yourself"
        )
    backend = BubblewrapBackend(settings)
    if not sys.platform.startswith("linux") or backend.bwrap is None:
        raise ProvisionError(
            f"the bubblewrap backend cannot run here (bwrap is not installed: {_sudo()}apt-get install bubblewrap); "
            "add packages to a container backend instead (--backend podman)"
        )
    sandbox_env.check_not_hand_made(settings.state_dir)


def _check_env(settings: Settings, python: Path) -> None:
    """Start a real hardened sandbox with the new environment: a file the sandbox uid cannot read fails here."""
    availability = BubblewrapBackend(settings.replace(sandbox_python=python)).availability()
    if not availability.usable:
        raise ProvisionError(
            f"a bubblewrap sandbox does not start with the new environment: {availability.reason} (fix: "
            f"{availability.fix}). The sandbox environment was not changed"
        )


def _engine(settings: Settings, name: str, *, check_image: bool) -> image_packages.Engine:
    backend = ContainerBackend(settings, name)  # type: ignore[arg-type]
    if check_image:
        availability = backend.availability()
        if not availability.usable:
            raise ProvisionError(f"the {name} backend cannot run here: {availability.reason}; fix: {availability.fix}")
    if backend.binary is None:
        raise ProvisionError(f"{name} is not installed; install it ({_sudo()}apt-get install {name})")
    runtime = backend.oci_runtime
    return image_packages.Engine(
        name, backend.binary, tuple(backend.global_flags()), ("--runtime", runtime) if runtime else ()
    )


def _sudo() -> str:
    return "" if os.geteuid() == 0 else "sudo "
