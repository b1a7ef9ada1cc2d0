""" "Did you mean" for every host message that names something unknown: a server, a tool, an argument.

The host wrote this phrase in four places with small differences in wording; the differences are part of
messages users and sandboxed code already read, so they stay, but the matching and the phrase are made here
once. It sits at the bottom of the host's imports (standard library only) so any layer may use it. The guest
keeps its own copy in ``guest/mcp/_proxies.py``: guest code imports no host module.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence


def close_matches(word: str, candidates: Iterable[str], *, n: int = 3, cutoff: float = 0.5) -> list[str]:
    """The ``n`` candidates closest to ``word`` (difflib's ratio at least ``cutoff``), best first."""
    return difflib.get_close_matches(word, list(candidates), n=n, cutoff=cutoff)


def did_you_mean(
    matches: Sequence[str], *, lead: str = " Did you mean ", joiner: str = ", ", otherwise: str = ""
) -> str:
    """``<lead>'a', 'b'?`` for the matches (each ``repr``'d, joined by ``joiner``), or ``otherwise`` for none."""
    return f"{lead}{joiner.join(repr(match) for match in matches)}?" if matches else otherwise
