"""From a registry entry to what would run on the host: the launch plan a person is shown and consents to.

The model names an entry; it never writes a command line. This module derives the one way of running it the bridge
supports here, from the entry alone, and refuses clearly what it cannot run or would have to guess at:

- an npm package is installed with ``npm install`` into a folder of its own under the state directory, from the
  user's npm registry (``npm`` reads the user's ``.npmrc``), pinned to the entry's exact version, and its program
  started by its path. Not ``npx -y``: npx keeps its own process tree (the server then outlives the hub's kill) and
  resolves what it runs at every start.
- a PyPI package is installed with ``pip`` into a virtual environment of its own under the state directory (pip
  reads the user's ``pip.conf`` and ``PIP_INDEX_URL``), ``==`` the exact version, and its console script started by
  its path. Not ``uvx``: uv is not on every machine (it is not on PATH here), uvx leaves its own process tree behind
  as npx does, and it does not read ``pip.conf``. The entry's ``runtimeHint`` (``npx``, ``uvx``) only names the
  publisher's runtime; the bridge chooses its own from the package type.
- a remote server is reached at its Streamable HTTP or SSE URL.
- everything else is refused with why: OCI images (no container runtime is driven for servers yet), NuGet (no
  ``dnx``), MCPB bundles, a package served over HTTP (a port to pick and guard), a package of a registry other than
  the public one (the same name in the user's registry could be another package: dependency confusion), an argument
  or variable with a value the person would have to invent.

The entry also names the variables and headers it is given, and anyone may publish an entry, so a name that changes
what runs rather than what the server is told is refused, whatever its value (``denied_variable``): the loader's and
interpreters' own (``LD_PRELOAD``, ``NODE_OPTIONS``, ``PYTHONPATH``, ``PATH``: which ``node`` a script's shebang
finds), the installers' (``npm_config_*``, ``PIP_*``) and the ones that move trust or traffic (CA bundles, proxies).
A person asked to consent to ``node /.../server.js`` should not have to know that ``NODE_OPTIONS`` beside it means
another program runs first. And an npm version must be one full ``x.y.z``: npm reads ``1`` or ``1.2`` as a range
and ``next`` as a moving tag, so what installs would not be what was shown, and its install scripts run before the
installed version can be compared.

Secrets are never in a plan: only their names. Their values come from the bridge's secret settings
(``MCP_BRIDGE_SECRETS_DIR``, a file per name) when the server starts.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal

from ...errors import CodemodeError
from .entries import Argument, InputNeed, PackageRun, RemoteRun, ServerEntry

Kind = Literal["npm", "pypi", "remote"]
# The public registries a package entry may name (or leave out); any other is refused (dependency confusion).
PUBLIC_REGISTRIES: Mapping[str, tuple[str, ...]] = {
    "npm": ("https://registry.npmjs.org", "https://registry.npmjs.com"),
    "pypi": ("https://pypi.org", "https://pypi.org/simple", "https://upload.pypi.org"),
}
NPM_NAME = re.compile(r"^(@[a-z0-9][a-z0-9._~-]*/)?[a-z0-9][a-z0-9._~-]{0,213}$")
PYPI_NAME = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]{0,200}[A-Za-z0-9])?$")
EXACT_VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.+_-]{0,100}$")
SEMVER = re.compile(
    r"^(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)\.(0|[1-9][0-9]*)(-[0-9A-Za-z.-]{1,60})?(\+[0-9A-Za-z.-]{1,60})?$"
)
PEP440 = re.compile(r"^v?[0-9][A-Za-z0-9.+_-]{0,100}$", re.IGNORECASE)  # pip's == on anything else is an error
# Variables a registry entry may not set (matched without case): they change which program runs or what it loads.
DENIED_VARIABLES = frozenset({
    "PATH", "HOME", "ENV", "BASH_ENV", "SHELLOPTS", "BASHOPTS", "IFS", "PS4", "CDPATH", "GCONV_PATH", "LOCPATH",
    "NLSPATH", "HOSTALIASES", "RESOLV_HOST_CONF", "TMPDIR", "NODE_OPTIONS", "NODE_PATH", "NODE_EXTRA_CA_CERTS",
    "NODE_TLS_REJECT_UNAUTHORIZED", "NODE_REPL_EXTERNAL_MODULE", "NODE_V8_COVERAGE", "PERL5OPT", "PERL5LIB",
    "PERLLIB", "RUBYOPT", "RUBYLIB", "JAVA_TOOL_OPTIONS", "_JAVA_OPTIONS", "JDK_JAVA_OPTIONS", "DOTNET_STARTUP_HOOKS",
    "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "HTTP_PROXY", "HTTPS_PROXY",
    "ALL_PROXY", "NO_PROXY", "VIRTUAL_ENV", "CONDA_PREFIX", "XDG_CONFIG_HOME", "XDG_DATA_HOME",
})  # fmt: skip
DENIED_PREFIXES = ("LD_", "DYLD_", "PYTHON", "NPM_CONFIG_", "PIP_", "UV_", "GIT_", "MALLOC_", "GLIBC_", "MCP_BRIDGE_")
# Headers the HTTP client owns (framing, routing): an entry setting them would be smuggling, not configuring.
DENIED_HEADERS = frozenset({"HOST", "CONTENT-LENGTH", "TRANSFER-ENCODING", "CONNECTION", "UPGRADE", "TE", "TRAILER",
                            "PROXY-AUTHORIZATION", "MCP-SESSION-ID", "MCP-PROTOCOL-VERSION"})  # fmt: skip
VARIABLE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
HEADER = re.compile(r"^[A-Za-z0-9-]{1,128}$")


class CannotAdd(CodemodeError):
    """A registry entry the bridge cannot run here, or a request to add one it must refuse; the message says why."""


@dataclasses.dataclass(frozen=True)
class LaunchPlan:
    """Everything that would run or be contacted, as plain data: what the person reads and the store keeps."""

    entry: str  # the registry name, io.github.owner/server
    entry_version: str
    source: str  # the registry or catalog the entry came from
    kind: Kind
    package: str = ""  # npm or PyPI package name
    version: str = ""  # its exact version
    arguments: tuple[str, ...] = ()  # the package's command-line arguments, fixed by the entry
    env: tuple[tuple[str, str], ...] = ()  # fixed, non-secret environment values from the entry
    secrets: tuple[str, ...] = ()  # names of environment variables (remote: headers) filled from secret settings
    transport: Literal["stdio", "streamable-http", "sse"] = "stdio"
    url: str = ""  # remote only
    headers: tuple[tuple[str, str], ...] = ()  # remote only: fixed, non-secret header values

    def as_json(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_json(cls, data: object) -> LaunchPlan:
        """A plan read back from the store; anything malformed is a ``CannotAdd`` (the file was changed by hand)."""
        if not isinstance(data, Mapping):
            raise CannotAdd("a stored launch plan is not an object", fix="remove the server and add it again")
        fields = {field.name: field for field in dataclasses.fields(cls)}
        if set(data) - set(fields) or not {"entry", "entry_version", "source", "kind"} <= set(data):
            raise CannotAdd("a stored launch plan has unknown or missing fields", fix="remove it and add it again")
        values: dict[str, Any] = {}
        for name, value in data.items():
            if name in ("arguments", "secrets"):
                if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
                    raise CannotAdd(f"a stored launch plan's {name} is malformed", fix="remove it and add it again")
                values[name] = tuple(value)
            elif name in ("env", "headers"):
                pairs = value if isinstance(value, list) else None
                if pairs is None or not all(
                    isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in pairs
                ):
                    raise CannotAdd(f"a stored launch plan's {name} is malformed", fix="remove it and add it again")
                values[name] = tuple((p[0], p[1]) for p in pairs)
            elif isinstance(value, str):
                values[name] = value
            else:
                raise CannotAdd(f"a stored launch plan's {name} is not text", fix="remove it and add it again")
        if values["kind"] not in ("npm", "pypi", "remote") or values.get("transport", "stdio") not in (
            "stdio",
            "streamable-http",
            "sse",
        ):
            raise CannotAdd("a stored launch plan has an unknown kind or transport", fix="remove it and add it again")
        return cls(**values)

    def digest(self) -> str:
        """The sha256 of the plan: what a person's consent is bound to, and the audit line names."""
        return hashlib.sha256(json.dumps(self.as_json(), sort_keys=True).encode()).hexdigest()


def plan_for(entry: ServerEntry, runnable: Sequence[Kind]) -> LaunchPlan:
    """The first way of running ``entry`` that the bridge supports and this host can (``runnable``: the kinds whose
    tools are installed), in the entry's order, packages before remotes; ``CannotAdd`` saying why for each way."""
    reasons: list[str] = []
    if entry.status not in ("active", ""):
        raise CannotAdd(
            f"the registry marks {entry.name!r} version {entry.version} as {entry.status}",
            fix="find another server with find_servers()",
        )
    for package in entry.packages:
        try:
            return _package_plan(entry, package, runnable)
        except CannotAdd as exc:
            reasons.append(str(exc.args[0]))
    for remote in entry.remotes:
        try:
            return _remote_plan(entry, remote)
        except CannotAdd as exc:
            reasons.append(str(exc.args[0]))
    if not reasons:
        reasons.append("the entry names no package and no remote endpoint")
    raise CannotAdd(
        f"the bridge cannot run {entry.name!r} version {entry.version} here: " + "; ".join(reasons),
        fix="pick another server (find_servers()), or ask the person to configure it by hand in a client's config",
    )


def _package_plan(entry: ServerEntry, package: PackageRun, runnable: Sequence[Kind]) -> LaunchPlan:
    kind = package.registry_type.lower()
    what = f"the {package.registry_type} package {package.identifier!r}"
    if kind == "oci":
        raise CannotAdd(f"{what} is a container image, which add_server does not run (no container runtime is "
                        "driven for upstream servers)")  # fmt: skip
    if kind not in ("npm", "pypi"):
        raise CannotAdd(f"{what} is of a kind add_server does not install (it installs npm and PyPI packages)")
    if kind not in runnable:
        tool = "npm and node" if kind == "npm" else "a Python with venv"
        raise CannotAdd(f"{what} needs {tool} on the bridge's host, which it does not have")
    if package.transport != "stdio":
        raise CannotAdd(f"{what} serves over {package.transport}, and add_server starts packages over stdio only")
    base = package.registry_base_url.rstrip("/")
    if base and base not in PUBLIC_REGISTRIES[kind]:
        raise CannotAdd(f"{what} comes from the registry {base[:100]!r}, not the public one; installing that name "
                        "from your registry could install another package")  # fmt: skip
    if not (NPM_NAME if kind == "npm" else PYPI_NAME).match(package.identifier):
        raise CannotAdd(f"{what} is not a valid {package.registry_type} package name")
    exact = SEMVER if kind == "npm" else PEP440
    if not EXACT_VERSION.match(package.version) or not exact.match(package.version):
        raise CannotAdd(f"{what} names the version {package.version[:60]!r}, which is not one exact release")
    env, secrets = _inputs(package.environment, VARIABLE, f"{what}: the environment variable", denied_variable)
    return LaunchPlan(
        entry=entry.name,
        entry_version=entry.version,
        source=entry.source,
        kind="npm" if kind == "npm" else "pypi",
        package=package.identifier,
        version=package.version,
        arguments=_arguments(package.package_arguments, what),
        env=env,
        secrets=secrets,
    )


def _remote_plan(entry: ServerEntry, remote: RemoteRun) -> LaunchPlan:
    if any(mark in remote.url for mark in ("{", "}", " ")):
        raise CannotAdd(f"the remote URL {remote.url[:100]!r} has a placeholder the person would have to fill in")
    headers, secrets = _inputs(
        remote.headers, HEADER, "the remote's header", lambda name: name.upper() in DENIED_HEADERS
    )
    return LaunchPlan(
        entry=entry.name,
        entry_version=entry.version,
        source=entry.source,
        kind="remote",
        transport=remote.transport,
        url=remote.url,
        headers=headers,
        secrets=secrets,
    )


def denied_variable(name: str) -> bool:
    """Whether an entry may not set the environment variable ``name`` (the module says why)."""
    upper = name.upper()
    return upper in DENIED_VARIABLES or upper.startswith(DENIED_PREFIXES)


def _inputs(needs: Sequence[InputNeed], pattern: re.Pattern[str], what: str, denied: Callable[[str], bool]) -> tuple[
        tuple[tuple[str, str], ...], tuple[str, ...]]:  # fmt: skip
    """The fixed values and the secret names of an entry's variables or headers; one the person would have to type
    (required, not secret, no value given) is refused, and so is one it would set whose name is ``denied``."""
    fixed: list[tuple[str, str]] = []
    secrets: list[str] = []
    for need in needs:
        if not pattern.match(need.name):
            raise CannotAdd(f"{what} {need.name[:60]!r} has a name that cannot be used")
        if denied(need.name) and (need.secret or need.default is not None or need.required):
            raise CannotAdd(f"{what} {need.name!r} would change what runs or where it connects, not configure the "
                            "server; the bridge never lets a registry entry set it")  # fmt: skip
        if need.secret:
            secrets.append(need.name)
        elif need.default is not None and "{" not in need.default:
            fixed.append((need.name, need.default))
        elif need.required:
            raise CannotAdd(f"{what} {need.name!r} needs a value the entry does not give ({need.description[:120]})")
    return tuple(fixed), tuple(dict.fromkeys(secrets))


def _arguments(arguments: Sequence[Argument], what: str) -> tuple[str, ...]:
    line: list[str] = []
    for argument in arguments:
        if argument.value is None or "{" in argument.value:
            if argument.required or argument.kind == "positional":
                raise CannotAdd(f"{what} needs the argument {argument.name or argument.hint or '?'!r}, whose value "
                                "the person would have to supply")  # fmt: skip
            continue
        line += [argument.name, argument.value] if argument.kind == "named" else [argument.value]
    return tuple(line)
