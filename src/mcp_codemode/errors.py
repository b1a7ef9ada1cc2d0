"""The exceptions the bridge raises on purpose.

Every one of them carries a message meant for a person: what is wrong and what to do about it. The
command line prints them without a traceback; anything else escaping is a bug.
"""

from __future__ import annotations


class CodemodeError(Exception):
    """Base class of every error the bridge raises deliberately."""


class SettingsError(CodemodeError):
    """A setting (environment variable, settings file or flag) has a value we cannot use."""


class SandboxUnavailable(CodemodeError):
    """The chosen sandbox backend cannot run here; the message says what to install or change."""


class SandboxStartError(CodemodeError):
    """A worker was launched but never said it was ready."""


class SessionLimitError(CodemodeError):
    """Every session slot is busy, so no new session can be opened right now."""
