"""``mcp-codemode serve`` over stdio as MCP clients launch it, read and started before the settings are (issue 38).

A stdio client waits for the answer to its first request, and the answer needs neither the settings nor the argument
parser: reading them (the settings' dataclasses and their table, argparse and the parser of every command) cost
several per cent of the start, and Python's cyclic garbage collector, which scans every object the SDK's import makes,
as much again. So ``main`` takes this path for the command lines clients use (``serve`` with ``--no-discover``,
``--log-file``, ``--config`` or ``--transport stdio``): the collector is off until the first answer has gone out
(serve.py freezes what the start made and turns it back on), and the settings are read after that answer, before
anything else is served. An invalid setting still stops the server with the same message and exit status as before;
it comes after the first answer instead of before it. Any other command line (other options, an abbreviation, an
error) goes through argparse and reads the settings first, as every other command does.
"""

from __future__ import annotations

import asyncio
import gc
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import CodemodeError
from .exits import EXIT_BRIDGE, EXIT_OK

if TYPE_CHECKING:
    from ..settings import Settings
    from .serve import FindServers

# What argparse gives ``serve`` when no option is given: the plain path hands cli/main.py the same namespace.
DEFAULTS: dict[str, Any] = {
    "settings": None, "command": "serve", "transport": "stdio", "host": None, "port": None, "token": None,
    "log_file": None, "log_format": None, "metrics_port": None, "backend": None, "config": [], "no_discover": False,
}  # fmt: skip
_VALUED = {"--log-file": "log_file", "--config": "config", "--transport": "transport"}


def plain_serve(argv: Sequence[str]) -> dict[str, Any] | None:
    """What argparse would make of ``argv`` (as a dict) if it is a plain stdio ``serve``; else None (argparse reads it).

    Only options spelled in full, each value a separate word or after ``=``, and no value that starts with ``-``
    (which argparse reads as an option): anything else is argparse's to accept, refuse or explain.
    """
    if not argv or argv[0] != "serve":
        return None
    args = {**DEFAULTS, "config": []}
    words = list(argv[1:])
    while words:
        word = words.pop(0)
        if word == "--no-discover":
            args["no_discover"] = True
            continue
        name, equals, value = word.partition("=")
        if name not in _VALUED:
            return None
        if not equals:
            if not words:
                return None
            value = words.pop(0)
        if not value or value.startswith("-"):
            return None
        if name == "--transport":
            if value != "stdio":
                return None
            args["transport"] = value
        elif name == "--config":
            args["config"].append(Path(value))
        else:
            args["log_file"] = Path(value)
    return args


def serve_plain(options: dict[str, Any]) -> int:
    """Serve over stdio with the collector off until the first answer, and the settings read after it."""
    collecting = gc.isenabled()
    gc.disable()  # before the SDK is imported, which makes most of the objects the collector would scan
    from .serve import serve_before_settings

    loaded = False

    def load() -> tuple[Settings, FindServers]:
        nonlocal loaded
        loaded = True
        import argparse  # neither is imported before the first answer: that is the point of this path

        from . import main as cli

        args = argparse.Namespace(**options)
        settings = cli.command_settings(args)
        return settings, lambda: cli.servers_found(settings, args)

    try:
        asyncio.run(serve_before_settings(load))
        if not loaded:  # the client left before the first answer: the settings are still checked, and a bad one said
            load()
        return EXIT_OK
    except CodemodeError as exc:
        print(f"mcp-codemode: {exc}", file=sys.stderr)
        return EXIT_BRIDGE
    except KeyboardInterrupt:
        return 130
    finally:
        if collecting:
            gc.enable()
