"""The command lines MCP clients launch ``serve`` with, read without argparse (cli/plain_serve.py): pure logic.

A plain stdio ``serve`` answers its client before the argument parser is loaded, so what it reads must be exactly what
argparse reads, and every other command line must be left to argparse, which accepts, refuses or explains it.
"""

from __future__ import annotations

import argparse

import pytest

from mcp_codemode.cli.main import _parser
from mcp_codemode.cli.plain_serve import plain_serve

PLAIN = [
    ["serve"],
    ["serve", "--no-discover"],
    ["serve", "--log-file", "/tmp/bridge.log", "--no-discover"],
    ["serve", "--log-file=/tmp/a.log", "--log-file", "b.log"],  # the last one wins, as in argparse
    ["serve", "--config", "a.json", "--config=b.toml", "--no-discover", "--no-discover"],
    ["serve", "--transport", "stdio"],
    ["serve", "--transport=stdio", "--config", "servers/"],
]
OTHERS = [
    [],
    ["run", "-c", "1"],
    ["--settings", "s.toml", "serve"],  # an option before the command
    ["serve", "--transport", "http"],
    ["serve", "--backend", "podman"],
    ["serve", "--metrics-port", "9464"],
    ["serve", "--no-disc"],  # an abbreviation argparse accepts
    ["serve", "--log-fil", "x.log"],
    ["serve", "--log-file"],  # a value missing
    ["serve", "--log-file", "-x.log"],  # argparse reads it as an option
    ["serve", "--config="],
    ["serve", "--transport", "tcp"],  # refused by argparse, with its usage line
    ["serve", "extra"],
    ["serve", "-h"],
    ["serve", "--", "--no-discover"],
]


@pytest.mark.parametrize("argv", PLAIN, ids=" ".join)
def test_a_plain_serve_is_read_as_argparse_reads_it(argv: list[str]) -> None:
    options = plain_serve(argv)
    assert options is not None
    assert argparse.Namespace(**options) == _parser().parse_args(argv)


@pytest.mark.parametrize("argv", OTHERS, ids=" ".join)
def test_every_other_command_line_is_left_to_argparse(argv: list[str]) -> None:
    assert plain_serve(argv) is None
