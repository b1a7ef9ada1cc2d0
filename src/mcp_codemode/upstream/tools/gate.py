"""What the tool directory asks of a policy: whether a server or a tool is refused, and why.

The policy (``mcp_codemode.policy.rules.Policy``) belongs to the bridge and is read from the settings; the directory is
below both and applies it to every view of the servers. So the directory declares here the questions it
asks (``Gate``) and the answer's type (``Refused``), and the composition root hands it the policy, which
answers them. Nothing here decides anything: the rules stay in ``policy``.
"""

from __future__ import annotations

import dataclasses
from typing import Protocol

from mcp import types


@dataclasses.dataclass(frozen=True)
class Refused:
    """Why the policy refuses something: ``rule`` is the key that decided (for the audit log), ``reason``
    the sentence for the agent, without the subject (the caller says what was refused)."""

    rule: str
    reason: str


class Gate(Protocol):
    """The policy as the directory uses it: ``None`` allows, a ``Refused`` says which rule refuses and why."""

    def server_refusal(self, name: str, alias: str) -> Refused | None: ...

    def tool_refusal(
        self, server: str, server_alias: str, tool: str, tool_alias: str, annotations: types.ToolAnnotations | None
    ) -> Refused | None: ...

    def resource_refusal(self, server: str, server_alias: str, uri: str) -> Refused | None: ...

    def prompt_refusal(self, server: str, server_alias: str, prompt: str) -> Refused | None: ...
