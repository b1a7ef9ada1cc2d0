"""The words of an approval question (``ask_tools``): everything the user approves, and nothing hidden in it.

The question is the only thing the user reads before saying yes, and almost all of it comes from parties we do not
trust: the arguments from sandboxed code, the server's and the tool's names from an upstream server. So it must
show every character of what will be sent, and show it as what it is. Two ways it could lie (issue 30):

- *Cut short.* Arguments too long to read in a question would have to be cut, and then the user approves text
  they never saw (the payload after the cut). Such a call is refused instead (``TooLongToShow``), saying how
  far over the limit it is and what to do; it never reaches the user.
- *Characters that are not what they look like.* Line and paragraph separators start lines a client may show as
  the question's own, bidi controls reorder what follows (``delete_*`` read backwards), zero-width and other
  format characters hide inside names. Every control (Unicode category Cc), format (Cf), surrogate (Cs) and
  line or paragraph separator (Zl, Zp) character is shown as its escape (``\\u202e``), in the arguments and in the
  names alike. The arguments are JSON, whose own escape this is, so the shown text still reads back to the very
  value that is sent; the only raw newlines left are those of the JSON layout.
"""

from __future__ import annotations

import json
import unicodedata
from typing import Any

from ..errors import CodemodeError

# The most characters of arguments (as shown: indented JSON, escapes included) a question may hold; a call whose
# arguments are longer is refused rather than cut. About 30 lines of a client's dialog: long enough for the calls
# people approve (a path, a message, a short body), short enough to be read before saying yes.
MAX_SHOWN_ARGUMENTS = 2000
_HIDDEN = frozenset({"Cc", "Cf", "Cs", "Zl", "Zp"})


class TooLongToShow(CodemodeError):
    """The arguments of a call are too long to show whole in its approval question."""

    def __init__(self, length: int) -> None:
        self.length = length
        super().__init__(
            f"its arguments are too long to show for approval: {length:,} characters as shown, "
            f"{length - MAX_SHOWN_ARGUMENTS:,} over the limit of {MAX_SHOWN_ARGUMENTS:,}, and a question must show "
            "everything it approves; pass smaller arguments (split the call, or send a large value another way), "
            "or take the tool out of ask_tools"
        )


def visible(text: str, keep: str = "") -> str:
    """``text`` with every control, format, surrogate and separator character (bar those in ``keep``) written as
    its escape, ``\\uXXXX`` (``\\UXXXXXXXX`` beyond the first plane)."""
    return "".join(
        _escape(char) if char not in keep and unicodedata.category(char) in _HIDDEN else char for char in text
    )


def _escape(char: str) -> str:
    code = ord(char)
    return f"\\u{code:04x}" if code <= 0xFFFF else f"\\U{code:08x}"


def shown_arguments(arguments: dict[str, Any]) -> str:
    """The arguments as the question shows them: indented JSON with sorted keys, hidden characters escaped (the
    layout's newlines kept); ``TooLongToShow`` when that is over ``MAX_SHOWN_ARGUMENTS`` characters."""
    layout = json.dumps(arguments, ensure_ascii=False, indent=1, sort_keys=True, default=str)
    shown = visible(layout, keep="\n")  # JSON escapes the newlines inside strings itself: these are the layout's
    if len(shown) > MAX_SHOWN_ARGUMENTS:
        raise TooLongToShow(len(shown))
    return shown


def approval_question(server: str, tool: str, why: str, arguments: dict[str, Any]) -> str:
    """The message of the elicitation that asks the user to approve one call (``TooLongToShow`` as above)."""
    shown = shown_arguments(arguments)
    return (
        f"Sandboxed code wants to call {visible(server)}/{visible(tool)}, which needs your approval "
        f"({visible(why)}), with these arguments:\n{shown}\nAllow this call?"
    )
