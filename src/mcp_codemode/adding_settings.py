"""Whether sandboxed code may ask to add MCP servers from a registry (``runtime.add_server``), and which.

Apart from ``settings_fields.py`` because that table is near its size bound; like ``console_settings.py`` the rows
are plain tuples the table turns into its fields. One setting, ``MCP_BRIDGE_ADD_SERVERS``:

- ``ask`` (the default): the local user (stdio, or HTTP without tokens) may propose any entry, each added only once
  a person says yes; a token's principal on the HTTP face is refused;
- ``ask-all``: every principal, token holders too, may propose any entry, each added once its own client says yes;
- ``off``: ``add_server`` is refused before anything is looked up or asked;
- a comma-separated allow list of exact registry names (``io.github.acme/weather``) and namespaces
  (``io.github.acme/*``): only those may be proposed, and still each one is asked about.

A namespace matches by its exact text up to and including the slash, so ``io.github.acme/*`` never lets
``io.github.acme-evil/x`` or ``io.github.acrne/x`` through. No setting lets a server in without a person's answer.

Why ``ask`` stops at token holders: the person who answers is the one behind the calling client. For the local user
that is the host's owner, whose yes to run a package's code as the bridge's user is theirs to give. For a token's
principal it is the token's holder, who can publish a package to the public registry and say yes to it himself: his
package's install scripts and server then run as the bridge's user, which can read every secret file, every other
principal's state and the tokens. So a token's principal may add only what the operator named (an allow list) or,
on a bridge whose every token holder is trusted with the host, anything (``ask-all``).
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any, Literal

_ENTRY = re.compile(r"^[a-zA-Z0-9.-]+/([a-zA-Z0-9._-]+|\*)$")


@dataclasses.dataclass(frozen=True)
class AddPolicy:
    """What ``MCP_BRIDGE_ADD_SERVERS`` says: ``mode`` and, for ``allow``, the names and namespaces allowed."""

    mode: Literal["ask", "ask-all", "off", "allow"] = "ask"
    allowed: tuple[str, ...] = ()

    def refusal(self, name: str, local: bool) -> str:
        """Why the entry ``name`` may not be proposed ("" when it may); ``local``: the local user asks, not a token's
        principal."""
        if self.mode == "off":
            return "adding servers is turned off on this bridge (MCP_BRIDGE_ADD_SERVERS=off)"
        if self.mode == "ask" and not local:
            return ("a token's holder may add only the servers the operator's allow list names (MCP_BRIDGE_ADD_SERVERS="
                    "io.github.acme/*,...), or any with MCP_BRIDGE_ADD_SERVERS=ask-all: an added server runs as the "
                    "bridge's user, and the yes would be only the token holder's own")  # fmt: skip
        if self.mode == "allow" and not any(
            name == allowed or (allowed.endswith("/*") and name.startswith(allowed[:-1])) for allowed in self.allowed
        ):
            return (f"{name!r} is not among the servers this bridge lets code propose (MCP_BRIDGE_ADD_SERVERS allows "
                    f"{', '.join(self.allowed)})")  # fmt: skip
        return ""


ASK = AddPolicy()


def add_policy(text: str) -> AddPolicy:
    value = text.strip()
    if value.lower() in ("", "ask"):
        return AddPolicy()
    if value.lower() in ("off", "ask-all"):
        return AddPolicy("off" if value.lower() == "off" else "ask-all")
    names = tuple(dict.fromkeys(item.strip() for item in value.split(",") if item.strip()))
    if not names or not all(_ENTRY.match(name) for name in names):
        raise ValueError(text)
    return AddPolicy("allow", names)


#: (name, variable, parser, what it expects, an example): the rows settings_fields.py adds to its table.
ADDING_FIELDS: tuple[tuple[str, str, Callable[[str], Any], str, str], ...] = (
    (
        "add_servers",
        "MCP_BRIDGE_ADD_SERVERS",
        add_policy,
        "ask (the local user's code may propose any registry server, each added only with a person's consent; token "
        "holders are refused), ask-all (token holders too), off, or a comma-separated allow list of registry names "
        "and namespaces (io.github.acme/*), for every principal, each still asked about",
        "io.github.modelcontextprotocol/*,io.github.acme/weather",
    ),
)
