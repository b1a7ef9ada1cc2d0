"""``${secret:NAME}``: a credential read from a file of the secrets directory (``MCP_BRIDGE_SECRETS_DIR``).

Why files and not environment variables: on Kubernetes, a variable from a Secret (``secretKeyRef``) is fixed when the
container starts, so a rotated credential needs a restart; a Secret mounted as a volume is updated in place by the
kubelet (every key a file, swapped at once through the ``..data`` link), which the config refresh sees.

Apart from the expander because what it guards is a path on the host chosen by whoever writes the config file, who
need not be the operator who mounted the secrets: a name is one file name (no ``/``, no leading dot, so neither
``../../etc/shadow`` nor the kubelet's ``..data`` can be named), the file it resolves to must lie inside the
directory once every link is followed (the kubelet's own links do; a link planted to ``/etc/shadow`` does not), be
a regular file of at most ``MAX_SECRET_BYTES`` and read as UTF-8 text. Errors name the secret and the directory,
never a byte of the value.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Final

from ...errors import CodemodeError

# A Kubernetes Secret's keys are [-._a-zA-Z0-9]+; a leading dot would reach the kubelet's own ..data entries.
SECRET_NAME: Final = re.compile(r"[A-Za-z0-9_-][A-Za-z0-9._-]{0,252}")
MAX_SECRET_BYTES: Final = 64 << 10  # a token, a password, a PEM key: far below; a mistaken path to a big file: above


class SecretError(CodemodeError):
    """A ``${secret:NAME}`` that cannot be filled in; the message says why and how to fix it, without the value."""


def read_secret(directory: Path | None, name: str, *, header: bool) -> str:
    """The text of secret ``name`` in ``directory``, with the line break a file usually ends with removed.

    ``header``: the value goes into an HTTP header, where a line break inside would start another header."""
    if directory is None:
        raise SecretError(
            f"uses ${{secret:{name}}}, but MCP_BRIDGE_SECRETS_DIR is not set; set it to the directory the secrets "
            "are mounted in"
        )
    if not SECRET_NAME.fullmatch(name):
        raise SecretError(
            f"uses ${{secret:{name[:60]}}}: a secret's name is one file name in MCP_BRIDGE_SECRETS_DIR (letters, "
            "digits, '.', '_' and '-', not starting with '.'), never a path"
        )
    try:
        root = directory.resolve(strict=True)
    except OSError as exc:
        raise SecretError(
            f"uses ${{secret:{name}}}, but MCP_BRIDGE_SECRETS_DIR ({directory}) cannot be read "
            f"({exc.strerror or exc}); mount the secrets there or fix the setting"
        ) from None
    where = f"secret {name!r} in {directory}"
    try:
        target = (root / name).resolve(strict=True)
    except FileNotFoundError:
        raise SecretError(
            f"needs {where}, which does not exist; add the key {name!r} to the Secret mounted there"
        ) from None
    except OSError as exc:
        raise SecretError(f"needs {where}, which cannot be read ({exc.strerror or exc})") from None
    if root not in target.parents:
        raise SecretError(
            f"needs {where}, which is a link to a file outside that directory; secrets are read from it alone"
        )
    data = _read(target, where)
    text = _text(data, where)
    if not text:
        raise SecretError(f"needs {where}, which is empty; put the credential in it")
    if "\0" in text or (header and ("\n" in text or "\r" in text)):
        what = "a header value" if header else "an environment variable"
        raise SecretError(f"needs {where}, which holds a line break or NUL that {what} cannot carry")
    return text


def _read(target: Path, where: str) -> bytes:
    """The bytes of the regular file ``target``, opened without following a link swapped in since it was resolved."""
    try:
        descriptor = os.open(target, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise SecretError(f"needs {where}, which cannot be read ({exc.strerror or exc})") from None
    with os.fdopen(descriptor, "rb") as file:
        info = os.fstat(file.fileno())
        if not stat.S_ISREG(info.st_mode):
            raise SecretError(f"needs {where}, which is not a regular file")
        if info.st_size > MAX_SECRET_BYTES:
            raise SecretError(f"needs {where}, which is over {MAX_SECRET_BYTES >> 10} KiB: not a credential")
        return file.read(MAX_SECRET_BYTES + 1)


def _text(data: bytes, where: str) -> str:
    if len(data) > MAX_SECRET_BYTES:
        raise SecretError(f"needs {where}, which is over {MAX_SECRET_BYTES >> 10} KiB: not a credential")
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        raise SecretError(f"needs {where}, which is not UTF-8 text") from None
    # `echo token > file` and most editors end a file with a line break that is not part of the credential.
    if text.endswith("\r\n"):
        return text[:-2]
    return text.removesuffix("\n")
