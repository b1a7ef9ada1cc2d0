"""Reading the TOML settings file: its flat keys, and its ``[policy]`` table turned into a ``Policy``.

Why a module apart from ``settings.py``: a file has failure modes the environment has not (missing, unreadable,
not TOML, a table in the wrong place, unknown keys) and the policy table has its own keys, types and examples;
each gets a message naming the file and showing a good value. ``Settings.load`` only asks for the two parts.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .errors import SettingsError
from .policy.rules import MAX_ARGUMENT_DEPTH_CEILING, Policy, check_pattern
from .settings_fields import FIELD_BY_NAME
from .sizes import parse_size

SETTINGS_FILE_ENV = "MCP_CODEMODE_SETTINGS"


def read_settings_file(path: Path) -> tuple[dict[str, object], dict[str, object] | None]:
    """The flat settings of the file, and its ``[policy]`` table (None when it has none)."""
    import tomllib  # only when there is a file: ``serve`` over stdio answers its client before (cli/serve.py)

    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise SettingsError(
            f"settings file {path} does not exist; create it, or point --settings / {SETTINGS_FILE_ENV} elsewhere"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise SettingsError(f"settings file {path} cannot be read: {exc}") from None
    except tomllib.TOMLDecodeError as exc:
        raise SettingsError(f"settings file {path} is not valid TOML: {exc}") from None
    section = data.get("mcp-codemode", data)
    if not isinstance(section, dict):
        raise SettingsError(f"settings file {path}: [mcp-codemode] must be a table")
    if section is not data and "policy" in data and "policy" not in section:
        # The rest of such a file is ignored; a policy silently ignored would be worse than none.
        raise SettingsError(
            f"settings file {path} has an [mcp-codemode] table, so its top-level [policy] table would be "
            "ignored: rename it [mcp-codemode.policy]"
        )
    section = dict(section)
    policy = section.pop("policy", None)
    unknown = sorted(set(section) - set(FIELD_BY_NAME))
    if unknown:
        raise SettingsError(
            f"settings file {path} has unknown key(s) {', '.join(unknown)}; known keys: "
            f"{', '.join(sorted([*FIELD_BY_NAME, 'policy']))}"
        )
    if policy is not None and not isinstance(policy, dict):
        raise SettingsError(f"settings file {path}: policy must be a table, written [policy] (docs/configuration.md)")
    return section, policy


_POLICY_EXAMPLES = {
    "allow_servers": 'allow_servers = ["github", "git*"]',
    "deny_servers": 'deny_servers = ["shell"]',
    "allow_tools": 'allow_tools = ["git/git_status", "*/read_*"]',
    "deny_tools": 'deny_tools = ["git/git_commit", "*/delete_*"]',
    "ask_tools": 'ask_tools = ["github/create_*", "*/delete_*"]',
    "deny_sampling": 'deny_sampling = ["untrusted-*"]',
    "allow_resources": 'allow_resources = ["docs/*", "github/repo://*"]',
    "deny_resources": 'deny_resources = ["file:///etc/*", "github/repo://*/secrets*"]',
    "allow_prompts": 'allow_prompts = ["everything/simple-*"]',
    "deny_prompts": 'deny_prompts = ["*/admin-*"]',
    "read_only": "read_only = true",
    "max_calls_per_run": "max_calls_per_run = 1000   # 0: no limit",
    "max_argument_bytes": 'max_argument_bytes = "1m"   # or a number of bytes',
    "max_argument_depth": f"max_argument_depth = 32   # 1 to {MAX_ARGUMENT_DEPTH_CEILING}",
    "max_calls_per_second": "max_calls_per_second = 10   # 0: no limit",
}


def policy_from_table(table: Mapping[str, object], path: Path) -> Policy:
    """The ``[policy]`` table as a ``Policy``; every wrong key or value is a SettingsError with an example."""
    unknown = sorted(set(table) - set(_POLICY_EXAMPLES))
    if unknown:
        raise SettingsError(
            f"settings file {path}: [policy] has unknown key(s) {', '.join(unknown)}; known keys: "
            f"{', '.join(sorted(_POLICY_EXAMPLES))}"
        )
    values: dict[str, Any] = {"source": str(path)}
    for key, raw in table.items():
        try:
            values[key] = _policy_value(key, raw)
        except (ValueError, TypeError) as exc:
            detail = f" ({exc})" if str(exc) else ""
            raise SettingsError(
                f"settings file {path}: policy.{key} = {_toml_text(raw)} is not valid{detail}; for example "
                f"{_POLICY_EXAMPLES[key]}"
            ) from None
    return Policy(**values)


def _policy_value(key: str, raw: object) -> Any:
    if key.startswith(("allow_", "deny_", "ask_")):
        if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw):
            raise TypeError("expected a list of strings")
        return tuple(check_pattern(item, kind=key.partition("_")[2]) for item in raw)
    if key == "read_only":
        if not isinstance(raw, bool):
            raise TypeError("expected true or false")
        return raw
    if key == "max_argument_bytes":
        if isinstance(raw, bool) or not isinstance(raw, (int, str)):
            raise TypeError('expected a size such as "1m" or a whole number of bytes')
        size = parse_size(raw) if isinstance(raw, str) else raw
        if size < 2:
            raise ValueError("at least 2 bytes, the size of {}")
        return size
    if key == "max_calls_per_second":
        if isinstance(raw, bool) or not isinstance(raw, (int, float)) or not 0 <= raw <= 1_000_000:
            raise ValueError("expected a number of calls per second from 0 (no limit) to 1,000,000")
        return float(raw)
    low, high = (1, MAX_ARGUMENT_DEPTH_CEILING) if key == "max_argument_depth" else (0, 10**9)
    if isinstance(raw, bool) or not isinstance(raw, int) or not low <= raw <= high:
        raise ValueError(f"expected a whole number from {low} to {high:,}")
    return raw


def _toml_text(raw: object) -> str:
    text = json.dumps(raw, ensure_ascii=False) if isinstance(raw, (str, list, int, float)) else repr(raw)
    if isinstance(raw, bool):
        text = "true" if raw else "false"
    return text if len(text) <= 80 else text[:77] + "..."
