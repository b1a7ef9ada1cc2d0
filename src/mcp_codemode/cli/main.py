"""The command line: ``serve`` (the MCP server), ``run``, ``servers``, ``search``, ``doctor``, ``console``, and the
set-up commands ``image build`` and ``packages add|remove|list``.

This is the composition root: the one place that reads the process's environment, home and working
directory, and hands them down (settings, config discovery) so no other module has to. The commands' bodies
live beside it and receive what this builds: ``serve.py`` (``serve``), ``commands.py`` (``run``, ``search``) and
the others; all but ``serve`` are imported when their command runs (``_command`` says why). The exit statuses are
``exits.py``'s.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .. import __version__
from ..admission import admit
from ..errors import CodemodeError, SettingsError
from ..observability_settings import LOG_FORMATS, otel_secrets
from ..provision import BACKENDS, DEFAULT_MIRROR, DEFAULT_SUITE
from ..runs.relay_params import MAX_LIMIT, MAX_OFFSET
from ..runs.session_names import DEFAULT_SESSION, check_session_name
from ..settings import Settings
from ..settings_fields import FIELD_BY_NAME, RUNTIME_CHOICES, SECRET_FIELDS, parse_field
from ..telemetry.logs import SECRETS, JsonFormatter, hide_in_logs
from ..upstream.model import Discovery
from ..upstream.tools import catalog
from .exits import EXIT_BRIDGE, EXIT_OK
from .serve import serve

if TYPE_CHECKING:
    from ..upstream.config.discovery import ConfigSources

log = logging.getLogger("mcp_codemode")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="mcp-codemode", description="Run Python in a hardened sandbox.")
    parser.add_argument("--version", action="version", version=f"mcp-codemode {__version__}")
    parser.add_argument("--settings", type=Path, help="TOML settings file (else $MCP_CODEMODE_SETTINGS)")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    run = commands.add_parser("run", help="run code in a fresh sandbox session")
    run.add_argument(
        "-c", dest="codes", action="append", metavar="CODE", help="code to run; repeat to run several cells"
    )
    run.add_argument("file", nargs="?", help="a file of Python code, or - for standard input")
    run.add_argument(
        "--backend", choices=(*RUNTIME_CHOICES, "bwrap"), help="sandbox backend (default: MCP_BRIDGE_RUNTIME or auto)"
    )
    run.add_argument("--timeout", type=_positive_float, help="seconds per cell (default: MCP_BRIDGE_TIMEOUT)")
    run.add_argument("--session", default=DEFAULT_SESSION, type=_session_name, help="session name")
    run.add_argument("-v", "--verbose", action="store_true", help="say which backend runs the code, and why")
    _config_option(run)

    serve = commands.add_parser("serve", help="serve run_python over MCP (stdio by default, or HTTP)")
    serve.add_argument("--transport", choices=("stdio", "http"), default="stdio", help="default: stdio")
    serve.add_argument("--host", help="HTTP address to bind (default: MCP_BRIDGE_HTTP_HOST or 127.0.0.1)")
    serve.add_argument("--port", type=int, help="HTTP port (default: MCP_BRIDGE_HTTP_PORT or 8765)")
    serve.add_argument(
        "--token", action="append", help="bearer token clients must send over HTTP (else MCP_BRIDGE_HTTP_TOKEN)"
    )
    serve.add_argument("--log-file", type=Path, help="write logs here instead of standard error")
    serve.add_argument(
        "--log-format", choices=LOG_FORMATS, help="text, or json: one event per line with its call, trace and span ids"
    )
    serve.add_argument(
        "--metrics-port", type=_whole(0, 65535), metavar="PORT",
        help="also serve Prometheus metrics at /metrics on this port of MCP_BRIDGE_METRICS_HOST (default 127.0.0.1)",
    )  # fmt: skip
    serve.add_argument(
        "--backend", choices=(*RUNTIME_CHOICES, "bwrap"), help="sandbox backend (default: MCP_BRIDGE_RUNTIME or auto)"
    )
    _config_option(serve)

    servers = commands.add_parser("servers", help="list the MCP servers found, where, and whether they start")
    servers.add_argument("--json", action="store_true", help="machine-readable output")
    connecting = servers.add_mutually_exclusive_group()
    connecting.add_argument(
        "--no-connect", action="store_true", help="only read the config files and the catalog cache; start nothing"
    )
    connecting.add_argument(
        "--refresh", action="store_true", help="start every server and list its tools again, rewriting the cache"
    )
    servers.add_argument("-v", "--verbose", action="store_true", help="log each server's start and stop")
    _config_option(servers)

    login = commands.add_parser("login", help="sign in to a remote MCP server once (OAuth, in your browser)")
    login.add_argument("server", metavar="SERVER", help="the remote server's name (or alias), as `servers` lists it")
    login.add_argument(
        "--port", type=_whole(0, 65535), default=0, metavar="PORT",
        help="the port on 127.0.0.1 the sign-in comes back to (default: any free one)",
    )  # fmt: skip
    login.add_argument("--no-browser", action="store_true", help="print the address to open; do not open a browser")
    login.add_argument(
        "--client-id", metavar="ID",
        help="a client id the provider's admin registered (instead of registering one); needs --port",
    )  # fmt: skip
    login.add_argument(
        "--client-secret-env", metavar="VAR",
        help="the environment variable holding that client's secret, if it has one (never on the command line)",
    )  # fmt: skip
    _config_option(login)
    logout = commands.add_parser("logout", help="forget the tokens of a remote MCP server")
    logout.add_argument("server", metavar="SERVER", help="the remote server's name (or alias)")
    _config_option(logout)

    search = commands.add_parser("search", help="find the tools of the configured MCP servers that fit a query")
    search.add_argument("query", nargs="+", metavar="QUERY", help="what you want to do, in your own words")
    search.add_argument("--json", action="store_true", help="print the reply sandboxed code gets, as JSON")
    search.add_argument(
        "--limit", type=_whole(1, MAX_LIMIT), default=5, metavar="N", help=f"hits to show (1-{MAX_LIMIT}, default 5)"
    )
    search.add_argument(
        "--offset", type=_whole(0, MAX_OFFSET), default=0, metavar="K", help="skip the K best hits (default 0)"
    )
    search.add_argument("--detail", choices=catalog.DETAILS, default="summary", help="how much of each tool to show")
    search.add_argument("--server", metavar="NAME", help="search this server's tools only (its name or alias)")
    search.add_argument("-v", "--verbose", action="store_true", help="log each server's start and stop")
    _config_option(search)

    doctor = commands.add_parser("doctor", help="check which sandboxes work here and what they enforce")
    doctor.add_argument("--json", action="store_true", help="machine-readable output")
    _config_option(doctor)
    console = commands.add_parser("console", help="open the running bridge's web console in a browser")
    console.add_argument("--no-browser", action="store_true", help="print the one-time link; do not open a browser")
    _provision_commands(commands)
    return parser


def _provision_commands(commands: Any) -> None:
    """``image build`` and ``packages add|remove|list``: setting up the sandboxes with the package alone."""
    image = commands.add_parser("image", help="build the podman/docker sandbox image locally, from Debian")
    image_commands = image.add_subparsers(dest="image_command", required=True, metavar="ACTION")
    build = image_commands.add_parser("build", help="bootstrap Debian (cached) and import it as the sandbox image")
    build.add_argument("--tag", help="image name (default: MCP_BRIDGE_IMAGE or mcp-codemode-sandbox:bookworm)")
    build.add_argument("--engine", choices=("podman", "docker"), help="where to import it (default: podman)")
    build.add_argument(
        "--cache-dir", type=Path, help="where the rootfs tarball is cached (else $MCP_CODEMODE_CACHE_DIR, XDG cache)"
    )
    build.add_argument("--suite", help=f"Debian suite (else $MCP_CODEMODE_IMAGE_SUITE or {DEFAULT_SUITE})")
    build.add_argument("--mirror", help="Debian mirror (else $MCP_CODEMODE_IMAGE_MIRROR or deb.debian.org)")
    build.add_argument("--force", action="store_true", help="rebuild an image that exists (its packages are kept)")
    build.add_argument(
        "--rootfs-only", action="store_true", help="only make the cached rootfs tarball (e.g. as root, for a user)"
    )

    packages = commands.add_parser("packages", help="add or remove Python packages of the sandboxes")
    package_commands = packages.add_subparsers(dest="packages_command", required=True, metavar="ACTION")
    backend_help = "the backend whose sandboxes change (default: MCP_BRIDGE_RUNTIME, else what auto picks)"
    add = package_commands.add_parser("add", help="install packages from the package index into the sandboxes")
    add.add_argument("specs", nargs="+", metavar="PACKAGE", help="a requirement such as pandas or toolz==1.0.0")
    remove = package_commands.add_parser("remove", help="remove packages added with `packages add`")
    remove.add_argument("specs", nargs="+", metavar="PACKAGE", help="a package name")
    listing = package_commands.add_parser("list", help="show the packages added to the sandboxes")
    listing.add_argument("--json", action="store_true", help="machine-readable output")
    for parser in (add, remove, listing):
        parser.add_argument("--backend", choices=(*BACKENDS, "bwrap"), help=backend_help)
    added = commands.add_parser("added", help="list or remove the MCP servers code added with your consent")
    added_actions = added.add_subparsers(dest="added_command", required=True, metavar="ACTION")
    added_list = added_actions.add_parser("list", help="each principal's added servers: what runs, from what, when")
    added_list.add_argument("--json", action="store_true", help="machine-readable output")
    forget = added_actions.add_parser("remove", help="forget an added server (by its name, alias or name@principal)")
    forget.add_argument("name", help="the server's name, alias, or name@principal as `added list` shows it")
    forget.add_argument("--principal", default="local", help="whose server (default: local, the stdio user)")


def _config_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        action="append",
        type=Path,
        default=[],
        metavar="FILE",
        help="an MCP servers config file (repeatable; read before MCP_SERVERS_CONFIG and the clients' files)",
    )
    parser.add_argument(
        "--no-discover", action="store_true", help="read only --config and MCP_SERVERS_CONFIG, not the clients' files"
    )


def _check_configs(args: argparse.Namespace) -> None:
    """A ``--config`` file that does not exist is refused before anything starts (or is served)."""
    for path in getattr(args, "config", ()):
        if not path.exists():
            raise SettingsError(
                f"--config {path}: no such file; give an MCP servers JSON or TOML file (or a folder of them)"
            )


def _sources(settings: Settings, args: argparse.Namespace) -> ConfigSources:
    """Where the configured MCP servers are read from (at start, and again by the refresh).

    The readers of the clients' files are imported here, when servers are looked for, for the reason ``_command``
    gives: ``serve`` over stdio looks for them only after its first answer.
    """
    from ..upstream.config.discovery import ConfigSources

    return ConfigSources(
        home=Path(os.environ.get("HOME") or Path.home()),
        cwd=Path.cwd(),
        env=dict(os.environ),
        explicit=(*args.config, *settings.servers_config),
        use_defaults=settings.discover_servers and not args.no_discover,
        allow_self=settings.allow_self_server,
        secrets_dir=settings.secrets_dir,
        withheld=frozenset(FIELD_BY_NAME[name].env for name in SECRET_FIELDS),  # the bridge's own tokens
    )


def _discovery(
    settings: Settings, args: argparse.Namespace, *, admitted: bool = True, sources: ConfigSources | None = None
) -> Discovery:
    """Find the configured MCP servers; broken files and entries are logged, and every good one still loads.
    ``admitted``: without the servers this bridge may not run (``admission.py``), which become problems too."""
    found = (sources or _sources(settings, args)).discover()
    if admitted:
        found = admit(settings, found)
    for problem in found.problems:
        log.warning("MCP server config: %s", problem)
    return found


def servers_found(settings: Settings, args: argparse.Namespace) -> tuple[Discovery, ConfigSources]:
    """What ``serve`` runs: the servers found, and where (kept: the refresh reads them again); public for
    plain_serve.py."""
    sources = _sources(settings, args)
    return _discovery(settings, args, sources=sources), sources


def _whole(low: int, high: int) -> Callable[[str], int]:
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"{value} is not between {low} and {high:,}")
        return value

    return parse


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds (for example --timeout 30)") from None
    if value <= 0:
        raise argparse.ArgumentTypeError("the timeout must be above zero seconds")
    return value


def _session_name(text: str) -> str:
    try:
        return check_session_name(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
        settings = command_settings(args)
        if args.command == "serve":
            asyncio.run(serve(settings, args.transport, lambda: servers_found(settings, args)))
            return EXIT_OK
        return _command(settings, args)
    except CodemodeError as exc:
        print(f"mcp-codemode: {exc}", file=sys.stderr)
        return EXIT_BRIDGE
    except KeyboardInterrupt:
        return 130


def command_settings(args: argparse.Namespace) -> Settings:
    """The settings of a command (``serve``'s options among them), with the logging and the ``--config`` files checked.

    Public for plain_serve.py, which calls it once ``serve`` has answered its client's first request.
    """
    backend = getattr(args, "backend", None)
    overrides: dict[str, Any] = {"runtime": "bubblewrap" if backend == "bwrap" else backend}
    if args.command == "serve":
        overrides.update(_serve_overrides(args))
    settings = Settings.load(settings_file=args.settings, overrides=overrides)
    # One-shot commands print results, so only problems are logged unless asked (-v or MCP_BRIDGE_LOG_LEVEL).
    chatty = args.command in ("serve", "doctor") or "log_level" in settings.sources
    chatty = chatty or getattr(args, "verbose", False)
    _configure_logging(settings if chatty else settings.replace(log_level="WARNING"))
    _check_configs(args)
    return settings


def _command(settings: Settings, args: argparse.Namespace) -> int:
    """Every command but ``serve``, each body imported here when its command runs rather than at the top.

    ``serve`` over stdio answers its client before the sandbox, upstream and provisioning code is loaded (serve.py,
    issue 38), which it could not if this module loaded every command's body; and a command loads only what it uses.
    """
    if args.command == "servers":
        from .servers_report import servers_report

        found = _discovery(settings, args)
        listing = asyncio.run(servers_report(settings, found, connect=not args.no_connect, refresh=args.refresh))
        print(json.dumps(listing.as_json(), indent=2) if args.json else listing.as_text())
        return EXIT_OK
    if args.command == "added":
        from .added import added_command

        return added_command(settings, args, sys.stdout)
    if args.command == "console":
        from ..console.launch import open_console

        return open_console(settings, sys.stdout, browser=not args.no_browser)
    if args.command == "search":
        from .commands import search

        return asyncio.run(search(settings, _discovery(settings, args), args))
    if args.command in ("login", "logout"):
        from .added import with_added
        from .login import login, logout, remote_server

        server = remote_server(with_added(settings, _discovery(settings, args)), args.server)
        if args.command == "logout":
            return asyncio.run(logout(server, settings, out=sys.stdout))
        secret = None
        if args.client_secret_env:
            secret = os.environ.get(args.client_secret_env)
            if not secret:
                variable = args.client_secret_env
                raise CodemodeError(f"--client-secret-env {variable}: that variable is not set",
                                    fix=f"export {variable}=... (the client's secret) first")  # fmt: skip
        return asyncio.run(login(server, settings, port=args.port, browser=not args.no_browser,
                                 out=sys.stdout, client_id=args.client_id, client_secret=secret))  # fmt: skip
    if args.command == "doctor":  # it reports the servers the bridge would refuse, so it reads them all
        from .doctor import diagnose, render_text

        sources = _sources(settings, args)
        watched = [path for path, _ in sources.watched()]
        report = diagnose(settings, _discovery(settings, args, admitted=False, sources=sources), watched)
        print(json.dumps(report, indent=2) if args.json else render_text(report))
        return EXIT_OK if report["selected"]["backend"] else EXIT_BRIDGE
    if args.command in ("image", "packages"):
        return _provision(settings, args)
    if args.command == "run":
        from .commands import read_cells, run_cells

        cells = read_cells(args)
        found = _discovery(settings, args)
        return asyncio.run(run_cells(settings, found, cells, args.timeout, args.session))
    return EXIT_BRIDGE


def _provision(settings: Settings, args: argparse.Namespace) -> int:
    """``image build`` and ``packages``: the rest of ``_command``, whose docstring says why this imports its body."""
    from ..provision import commands as provision

    if args.command == "image":
        cache_dir = args.cache_dir or os.environ.get("MCP_CODEMODE_CACHE_DIR")
        options = provision.ImageOptions(
            tag=args.tag,
            engine=args.engine,
            cache_dir=Path(cache_dir) if cache_dir else None,
            suite=args.suite or os.environ.get("MCP_CODEMODE_IMAGE_SUITE") or DEFAULT_SUITE,
            mirror=args.mirror or os.environ.get("MCP_CODEMODE_IMAGE_MIRROR") or DEFAULT_MIRROR,
            force=args.force,
            rootfs_only=args.rootfs_only,
        )
        return provision.build_image(settings, options, os.environ, sys.stderr)
    if args.packages_command == "list":
        return provision.list_packages(settings, args.backend, args.json, sys.stdout)
    change = provision.add if args.packages_command == "add" else provision.remove
    return change(settings, args.backend, args.specs, sys.stdout, sys.stderr)


def _serve_overrides(args: argparse.Namespace) -> dict[str, Any]:
    overrides: dict[str, Any] = {"http_host": args.host, "http_port": args.port, "log_file": args.log_file,
                                 "metrics_port": args.metrics_port, "log_format": args.log_format}  # fmt: skip
    if args.token:
        overrides["http_tokens"] = parse_field("http_tokens", ",".join(args.token), "--token")
    if args.port is not None and not 0 <= args.port <= 65535:
        raise SettingsError(f"--port {args.port} is not a TCP port; use 1-65535 (or 0 for any free port)")
    return overrides


def _configure_logging(settings: Settings) -> None:
    """Logs go to standard error or a file, never to standard output: over stdio that is the MCP channel. In either
    format no line holds a secret the bridge knows (telemetry/logs.py): its own tokens here, its servers' once the
    bridge has read them."""
    handler: logging.Handler
    if settings.log_file is not None:
        try:
            handler = logging.FileHandler(settings.log_file, encoding="utf-8")
        except OSError as exc:
            raise SettingsError(f"cannot write the log file {settings.log_file}: {exc.strerror}") from None
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
    else:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("mcp-codemode: %(message)s"))
    if settings.log_format == "json":
        handler.setFormatter(JsonFormatter())
    hide_in_logs([*settings.http_tokens, *settings.metrics_tokens, settings.peer_token, *otel_secrets(settings.otel)])
    handler.addFilter(SECRETS)
    logging.basicConfig(level=settings.log_level, handlers=[handler], force=True)
    logging.captureWarnings(True)
    # The SDK warns (an MCPDeprecationWarning, a UserWarning) each time roots are asked for or announced: the
    # 2026-07-28 protocol deprecates them, yet a handshake-era client or server still uses them through us, so the
    # warning told the user's log nothing it could act on, on every call. A process-wide filter, set once: a
    # ``catch_warnings`` around an ``await`` changes the filters of every other task running meanwhile.
    warnings.filterwarnings("ignore", message="The roots capability is deprecated")


if __name__ == "__main__":
    sys.exit(main())
