"""The settings the tool directory reads, declared as a protocol so the upstream package never imports the bridge's
``Settings`` (which satisfies it as it is): the upstream layer sits below the settings (tests/test_architecture.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from .gate import Gate


class DirectorySettings(Protocol):
    """The settings the directory reads, declared here so it need not import the bridge's ``Settings`` (which
    satisfies this as it is): where state lives, the cache's lifetime, the hub's timeouts and secrets, whether
    a server that is a code-mode bridge is kept, and the policy, of which only the ``Gate`` questions are asked."""

    @property
    def state_dir(self) -> Path: ...
    @property
    def catalog_ttl(self) -> float: ...
    @property
    def tool_timeout(self) -> float: ...
    @property
    def connect_timeout(self) -> float: ...
    @property
    def http_tokens(self) -> tuple[str, ...]: ...
    @property
    def allow_self_server(self) -> bool: ...
    @property
    def roots(self) -> tuple[Path, ...]: ...
    @property
    def policy(self) -> Gate: ...
