"""What the user may ask for: package names from the index, with optional extras and version constraints.

Each argument of ``packages add`` ends up on a line of a requirements file that uv or pip read, so anything
beyond a plain requirement (an option such as ``--index-url``, a path, a URL, an ``-e``) is refused here: it
would let one argument change where code comes from. Names compare in their normalized form (PEP 503), so
``packages remove PyYAML`` removes what ``packages add pyyaml`` added.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence

from .steps import ProvisionError

_NAME = r"[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?"
_VERSION = r"[A-Za-z0-9.*+!_-]+"
_CLAUSE = rf"(?:===|==|~=|!=|<=|>=|<|>)\s*{_VERSION}"
_REQUIREMENT = re.compile(
    rf"^(?P<name>{_NAME})\s*(?:\[\s*{_NAME}(?:\s*,\s*{_NAME})*\s*\])?\s*(?:{_CLAUSE}(?:\s*,\s*{_CLAUSE})*)?$"
)
_EXAMPLES = "for example pandas, toolz==1.0.0 or 'requests[socks]>=2.31'"


def normalize(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def requirement_name(spec: str) -> str:
    """The normalized package name of a requirement this module accepted."""
    match = _REQUIREMENT.match(spec)
    if match is None:
        raise ProvisionError(f"{spec!r} is not a package requirement ({_EXAMPLES})")
    return normalize(match.group("name"))


def check(specs: Sequence[str]) -> list[str]:
    """The specs, stripped, or an error naming the first one that is not a plain requirement."""
    checked: list[str] = []
    for raw in specs:
        spec = raw.strip()
        if not spec or _REQUIREMENT.match(spec) is None:
            raise ProvisionError(
                f"{raw!r} is not a package requirement: give names from the package index, {_EXAMPLES} "
                "(options, paths and URLs are not accepted)"
            )
        checked.append(spec)
    return checked


def merge(current: Iterable[str], added: Sequence[str]) -> list[str]:
    """``current`` with each added requirement replacing the one of the same name, new names appended."""
    by_name = {requirement_name(spec): spec for spec in current}
    for spec in added:
        by_name[requirement_name(spec)] = spec
    return list(by_name.values())


def without(current: Sequence[str], names: Sequence[str]) -> list[str]:
    """``current`` less the named packages; naming one that was never added is an error that lists what was."""
    wanted = {normalize(name.strip()): name for name in names}
    have = {requirement_name(spec) for spec in current}
    unknown = [name for key, name in wanted.items() if key not in have]
    if unknown:
        listed = ", ".join(current) if current else "none"
        raise ProvisionError(
            f"{', '.join(unknown)} {'was' if len(unknown) == 1 else 'were'} not added with `packages add` "
            f"(added: {listed}); only packages added by name can be removed (their dependencies go with them)"
        )
    return [spec for spec in current if requirement_name(spec) not in wanted]


def requirements_text(specs: Sequence[str]) -> str:
    return "".join(f"{spec}\n" for spec in specs)
