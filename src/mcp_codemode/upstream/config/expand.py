"""Variable expansion in server entries: ``${VAR}``, ``${env:VAR}``, ``$VAR`` (Gemini CLI), ``${secret:NAME}``
(our own files) and ``~``, per client.

Apart from parsing because it is the one place a config's text meets the user's environment and secrets: what may
be expanded, what is refused (``${input:...}``, the bridge's own secrets, a secret outside ``env`` and
``headers``), and what is left for the error message.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Final

from .entry import ReadContext
from .secrets import SecretError, read_secret

_VARIABLE = re.compile(r"\$\{([^{}]*)\}")


_VARIABLE_OR_BARE = re.compile(r"\$\{([^{}]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")  # Gemini CLI also reads $VAR


VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclasses.dataclass(frozen=True)
class _Variables:
    """How one client fills in the variables of a server entry, which the bridge copies so a server gets the same.

    Every client that expands reads the *client's* environment; the bridge, which a client starts, reads its
    own. ``bare``: ``$VAR`` counts too (Gemini CLI), not only the braced forms. ``keeps``: a reference the
    client cannot resolve is passed to the server as written (Claude Desktop and Codex expand nothing; Gemini
    CLI keeps what it cannot resolve), so a program that expands its own arguments, such as ``mcp-remote``,
    still gets it; elsewhere the client refuses the entry (Claude Code) or starts it broken (Cursor, VS Code),
    and the bridge reports it instead.
    """

    bare: bool = False
    keeps: bool = False
    secrets: bool = False  # ${secret:NAME} (upstream/config/secrets.py): our own files only, no other client knows it


VARIABLE_RULES: Final[Mapping[str, _Variables]] = {
    "codemode": _Variables(secrets=True),  # our own files: ./mcp-servers/*.json, --config, MCP_SERVERS_CONFIG
    "json": _Variables(),  # Claude Code's .mcp.json, Cursor, Windsurf, the reference bridge's ~/MCPs
    "claude-code-project": _Variables(),
    "claude-code": _Variables(),
    "claude-desktop": _Variables(keeps=True),
    "vscode": _Variables(),
    "gemini": _Variables(bare=True, keeps=True),
    "codex": _Variables(keeps=True),
}


class Expander:
    """``${VAR}``, ``${VAR:-default}`` and the client-specific forms, filled in as the entry's client would.

    A variable the entry's own ``env`` defines takes that value first: it is what the server will find in its
    environment, and what a program that expands its own arguments (``mcp-remote --header
    Authorization:${AUTH_HEADER}`` with ``AUTH_HEADER`` in ``env``) uses, whatever the bridge's environment
    holds under that name. ``${env:VAR}`` names the client's environment explicitly, so only the bridge's own
    environment answers it. Only braced forms are expanded (and ``$VAR`` where the client does it, Gemini
    CLI), so a bare ``$`` (in a regex argument, a price, a password) stays as written. When ``strict`` is
    false (skipped entries, which are only listed) nothing is reported and an unresolvable expression is
    left as it was.
    """

    def __init__(self, context: ReadContext, rules: _Variables, *, strict: bool) -> None:
        self.context = context
        self.rules = rules
        self.strict = strict
        self.local: Mapping[str, str] = {}  # the entry's own env, once expanded
        self.missing: list[str] = []
        self.inputs: list[str] = []
        self.unknown: list[str] = []
        self.secrets: list[str] = []  # why a ${secret:NAME} could not be filled in
        self.withheld: list[str] = []  # the bridge's own secrets the entry names

    def __call__(self, text: str, where: str) -> str:
        pattern = _VARIABLE_OR_BARE if self.rules.bare else _VARIABLE
        return pattern.sub(lambda match: self._one(match, where), text)

    def _lookup(self, name: str, *, local: bool) -> str | None:
        if local and name in self.local:
            return self.local[name]
        return self.context.env.get(name)

    def _one(self, match: re.Match[str], where: str) -> str:
        written = match.group(0)
        if match.group(1) is None:  # a bare $VAR: filled in when it is set, else kept, as Gemini CLI does
            value = self._lookup(match.group(2), local=True)
            return written if value is None else value
        body = match.group(1)
        builtin = {
            "workspaceFolder": str(self.context.cwd),
            "workspaceFolderBasename": self.context.cwd.name,
            "userHome": str(self.context.home),
            "pathSeparator": "/",
            "/": "/",
        }.get(body)
        if builtin is not None:
            return builtin
        if body.startswith("secret:") and self.rules.secrets:
            return self._secret(body.removeprefix("secret:"), where, written)
        if body.startswith("input:"):
            if not self.rules.keeps:
                _add(self.inputs, body.removeprefix("input:"))
            return written
        explicit = body.startswith("env:")
        name, separator, default = body.removeprefix("env:").partition(":-")
        if not VARIABLE_NAME.fullmatch(name):
            if not self.rules.keeps:
                _add(self.unknown, where)
            return written
        value = self._lookup(name, local=not explicit)
        if separator:  # like the shell's ${VAR:-default}: unset or empty both take the default
            return value if value else default
        if value is None:
            if name in self.context.withheld:
                _add(self.withheld, name)
            elif not self.rules.keeps:
                _add(self.missing, name)
            return written
        return value

    def _secret(self, name: str, where: str, written: str) -> str:
        """A secret's value, in ``env`` and ``headers`` only: the values the bridge hides from every message and
        log. In ``args`` it would show in every process listing, in a URL in ``servers`` and logs. An entry that is
        only listed (not strict: shadowed, disabled) never has its secrets read."""
        if not self.strict:
            return written
        if not where.startswith(("env[", "headers[")):
            _add(self.secrets, f"uses ${{secret:{name[:60]}}} in {where}; a secret may only fill a value of env or "
                               "headers, which are never shown")  # fmt: skip
            return written
        try:
            return read_secret(self.context.secrets_dir, name, header=where.startswith("headers["))
        except SecretError as exc:
            _add(self.secrets, str(exc))
            return written

    def complaints(self) -> list[str]:
        found = []
        if self.missing:
            names = ", ".join(self.missing)
            if len(self.missing) == 1:
                found.append(
                    f"needs environment variable {names}, which is not set; "
                    f"set it or give a default with ${{{names}:-value}}"
                )
            else:
                found.append(
                    f"needs environment variables {names}, which are not set; "
                    f"set them or give defaults with ${{{self.missing[0]}:-value}}"
                )
        for input_id in self.inputs:
            found.append(
                f"uses ${{input:{input_id}}}, which only VS Code can ask for; put the value in an "
                f"environment variable and write ${{env:NAME}} instead"
            )
        for name in self.withheld:
            found.append(
                f"names {name}, a secret of mcp-codemode itself, which is never passed to an upstream server; give "
                "the server a credential of its own"
            )
        found += self.secrets
        if self.unknown:
            found.append(
                f"has a ${{...}} expression mcp-codemode cannot resolve in {', '.join(self.unknown)}; "
                f"use ${{VAR}} or ${{VAR:-default}} for environment variables"
            )
        return found


def _add(items: list[str], item: str) -> None:
    if item not in items:
        items.append(item)


def expand_tilde(text: str, home: Path) -> str:
    if text == "~":
        return str(home)
    if text.startswith("~/"):
        return str(home / text[2:])
    return text
