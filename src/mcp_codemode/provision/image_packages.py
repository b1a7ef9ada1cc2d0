"""Python packages for container sandboxes: a layer on top of the image, made on the host.

The packages are installed on the host into a plain directory, for the image's own Python (its version, machine
and glibc, asked of the image itself), and copied by ``podman build`` / ``docker build`` into that Python's
``/usr/local/lib/python3.X/dist-packages`` (or whichever ``/usr/local`` site directory it has on ``sys.path``) as
one more layer. Nothing runs inside a container with network, and the image stays read-only to the sandbox.

The layered image takes the configured image's name (``MCP_BRIDGE_IMAGE``), so the backend needs no new setting.
Two labels make it self-describing: ``io.mcp-codemode.packages`` (what was asked for and what got installed) and
``io.mcp-codemode.base`` (the id of the image under the layer). A later change rebuilds from that base with the
whole new list, so a removed package really goes; removing the last one names the base again. The new image gets
the name only once it is built: a failed install leaves the name on the image that worked.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import tempfile
from importlib import metadata
from pathlib import Path
from typing import Any, TextIO

from .image import image_id, remove_if_nameless, tag
from .installer import Installer, TargetPython
from .requirements import requirements_text
from .sandbox_env import make_readable
from .steps import ProvisionError, hint, say, stream

PACKAGES_LABEL = "io.mcp-codemode.packages"
BASE_LABEL = "io.mcp-codemode.base"
_PROBE = (
    "import json, platform, sys; "
    "print(json.dumps({'version': '%d.%d' % sys.version_info[:2], 'path': sys.path, "
    "'machine': platform.machine(), 'libc': platform.libc_ver()}))"
)


@dataclasses.dataclass(frozen=True)
class Engine:
    """How to reach podman or docker: the binary, and the flags ``run`` needs here (OCI runtime, global flags)."""

    name: str
    binary: str
    global_flags: tuple[str, ...] = ()
    run_flags: tuple[str, ...] = ()


@dataclasses.dataclass(frozen=True)
class ImagePython:
    target: TargetPython
    site_dir: str  # where the layer's packages go, a directory on the image Python's sys.path


@dataclasses.dataclass(frozen=True)
class ImagePackages:
    requested: list[str]
    installed: list[tuple[str, str]]
    base: str | None  # the id under our layer, None when the image has no layer of ours


def recorded(engine: Engine, image: str) -> ImagePackages | None:
    """What our layer on the image holds; None when the image is not in the engine's store."""
    labels = _labels(engine, image)
    if labels is None:
        return None
    try:
        record = json.loads(labels.get(PACKAGES_LABEL) or "{}")
    except ValueError:
        record = {}
    installed = [(str(name), str(version)) for name, version in record.get("installed", [])]
    return ImagePackages(list(record.get("requested", [])), installed, labels.get(BASE_LABEL) or None)


def _labels(engine: Engine, image: str) -> dict[str, str] | None:
    done = subprocess.run(
        [engine.binary, "image", "inspect", "--format", "{{json .Config.Labels}}", image],
        capture_output=True, text=True, timeout=60, check=False,
    )  # fmt: skip
    if done.returncode != 0:
        return None
    try:
        labels: Any = json.loads(done.stdout.strip() or "null")
    except ValueError:
        return {}
    return {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {}


def probe_python(engine: Engine, image_ref: str, image: str) -> ImagePython:
    """Ask the image's python3 (in a container without network, as the sandbox's uid) for its version, platform
    and site directory. ``image_ref`` is what runs (an id), ``image`` the name messages use."""
    argv = [engine.binary, *engine.global_flags, "run", "--rm", "-i", "--network", "none", "--pull", "never"]
    argv += ["--user", "65534:65534", "--cap-drop", "ALL", "--security-opt", "no-new-privileges"]
    # podman as root on these hosts needs both ulimits set explicitly (DESIGN.md §4).
    argv += ["--ulimit", "nofile=1024:1024", "--ulimit", "nproc=4096:4096", "--log-driver", "none"]
    argv += [*engine.run_flags, "--entrypoint", "python3", image_ref, "-I", "-c", _PROBE]
    facts: Any = None
    why = "no output"
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=300, check=False)
        why = done.stderr.strip()[-300:] or f"exit status {done.returncode}"
        if done.returncode == 0:
            facts = json.loads(done.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError) as exc:
        why = str(exc)
    if not isinstance(facts, dict):
        raise ProvisionError(
            f"cannot ask the image {image} which Python it has ({engine.name} run failed: {why}); the image needs "
            "python3 on its PATH"
        )
    libc_name, libc_version = facts.get("libc") or ("", "")
    if libc_name != "glibc":
        libc_version = ""
    site = [p for p in facts.get("path", []) if p.startswith("/usr/local/lib/python") and p.endswith("-packages")]
    if not site:
        raise ProvisionError(
            f"the image {image}'s Python has no /usr/local/lib/python3.X/*-packages directory on sys.path, so a "
            "layer of packages would not be imported; use an image made by `mcp-codemode image build`"
        )
    return ImagePython(TargetPython(str(facts["version"]), str(facts["machine"]), libc_version), site[0])


def rebuild(
    engine: Engine, image: str, specs: list[str], installer: Installer | None, out: TextIO, base: str | None = None
) -> ImagePackages:
    """Give ``image`` (its name) a layer holding exactly ``specs``, built on its base; the name moves at the end.

    ``base`` overrides the image's own base (``image build --force`` passes the image it has just imported).
    """
    now = recorded(engine, image)
    if now is None:
        raise ProvisionError(
            f"image {image} is not present in {engine.name}: build it first with "
            f"`mcp-codemode image build --tag {image} --engine {engine.name}`"
        )
    old_id = image_id(engine.binary, image)
    base = base or now.base or old_id
    assert base is not None
    if image_id(engine.binary, base) is None:
        raise ProvisionError(
            f"the image {image} was layered on {base[:12]}, which is no longer in {engine.name}; rebuild the "
            f"image (`mcp-codemode image build --force --tag {image} --engine {engine.name}`), which keeps its packages"
        )
    if not specs:
        tag(engine.binary, base, image)
        say(out, f"no packages left: {image} is its base image again ({base[:12]})")
        _forget(engine, old_id, base)
        return ImagePackages([], [], None)
    assert installer is not None, "specs to install need an installer"
    say(out, f"asking {image}'s Python for its version and platform")
    python = probe_python(engine, base, image)
    with tempfile.TemporaryDirectory(prefix="mcp-codemode-layer-") as scratch:
        context = Path(scratch)
        target = context / "site-packages"
        requirements = context / "requirements.txt"
        requirements.write_text(requirements_text(specs), encoding="utf-8")
        t = python.target
        say(out, f"installing {', '.join(specs)} for Python {t.version} ({t.machine}, glibc {t.glibc}) with "
                 f"{installer.name} {installer.version}")  # fmt: skip
        done = stream(installer.into_target(target, requirements, python.target), out)
        if not done.ok:
            cause = hint(done.tail)
            raise ProvisionError(
                f"installing {', '.join(specs)} for the image failed ({installer.name} exit status {done.returncode})"
                + (f": {cause}" if cause else "; its output above says why")
                + f". The image {image} was not changed"
            )
        target.mkdir(exist_ok=True)
        make_readable(target)
        installed = sorted(
            {(d.metadata["Name"], d.version) for d in metadata.distributions(path=[str(target)])},
            key=lambda item: item[0].lower(),
        )
        record = json.dumps({"requested": specs, "installed": installed}, separators=(",", ":"))
        (context / "Containerfile").write_text(
            f"FROM {base}\nCOPY site-packages/ {python.site_dir}/\n", encoding="utf-8"
        )
        new_id = _build(engine, context, record, base, out)
    tag(engine.binary, new_id, image)
    say(out, f"{image} now holds {', '.join(specs)} (image {new_id[:12]} on base {base[:12]})")
    _forget(engine, old_id, base)
    return ImagePackages(specs, installed, base)


def _build(engine: Engine, context: Path, record: str, base: str, out: TextIO) -> str:
    iidfile = context / "image-id"
    argv = [engine.binary, "build", "--file", str(context / "Containerfile"), "--iidfile", str(iidfile)]
    if engine.name == "podman":
        argv += ["--pull=never", "--layers=false"]
    argv += ["--label", f"{PACKAGES_LABEL}={record}", "--label", f"{BASE_LABEL}={base}", str(context)]
    say(out, f"adding the packages to the image as a layer ({engine.name} build)")
    done = stream(argv, out)
    if not done.ok or not iidfile.is_file():
        raise ProvisionError(f"{engine.name} build failed (exit status {done.returncode}); its output above says why")
    return iidfile.read_text(encoding="utf-8").strip().removeprefix("sha256:")


def _forget(engine: Engine, old_id: str | None, base: str) -> None:
    """Remove the previous layered image if it is nameless now (a running container may still hold it: it stays)."""
    if old_id and old_id != base:
        remove_if_nameless(engine.binary, old_id)
