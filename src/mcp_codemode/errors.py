"""The exceptions the bridge raises on purpose.

Every one of them carries a message meant for a person: what is wrong and what to do about it. The
command line prints them without a traceback; anything else escaping is a bug.
"""

from __future__ import annotations


class CodemodeError(Exception):
    """Base class of every error the bridge raises deliberately.

    Most messages already end with what to do ("...; set X or install Y"), written into the text where the
    sentence reads best. Where the fix is a separate thought, pass it as ``fix``: it is appended after a
    semicolon, so every deliberate error reads "what is wrong; what to do" and the fix stays readable on its
    own (``exc.fix``) for callers that show it apart. Without ``fix`` the message is exactly the text given.
    """

    def __init__(self, *args: object, fix: str | None = None) -> None:
        super().__init__(*args)
        self.fix = fix

    def __str__(self) -> str:
        text = super().__str__()
        return f"{text}; {self.fix}" if self.fix else text


class SettingsError(CodemodeError):
    """A setting (environment variable, settings file or flag) has a value we cannot use."""


class SandboxUnavailable(CodemodeError):
    """The chosen sandbox backend cannot run here; the message says what to install or change."""


class SandboxStartError(CodemodeError):
    """A worker was launched but never said it was ready."""


class SessionLimitError(CodemodeError):
    """Every session slot is busy, so no new session can be opened right now."""


class CannotAsk(CodemodeError):
    """The client cannot be asked after all (no capability, no back channel, the policy): the message says why
    and what would make it possible.

    Here, not beside the upstream call links that catch it: the face raises it for its client and the policy's
    guard for its questions, and neither should reach into the other's part for the word they share."""
