"""The pure parts of Kubernetes' ``pods/exec`` WebSocket protocol: the URL, the channel bytes, the exit status.

Apart from the channel (``exec_channel.py``) because these are rules about bytes that tests drive with hostile
input on their own, without a socket. Everything read here comes from the sandbox side (the apiserver only
relays what the kubelet and the container runtime say about a process a guest controls), so each function
either returns something well-formed or raises ``ExecProtocolError`` naming what was wrong; nothing else.

The wire: each binary WebSocket message is one channel byte and then data. ``v4.channel.k8s.io`` has channels
0 stdin, 1 stdout, 2 stderr, 3 error (a ``Status`` object telling how the command ended) and 4 resize;
``v5.channel.k8s.io`` adds 255, "close": its one data byte names a channel the sender will not write again.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Sequence
from urllib.parse import quote, urlencode, urlsplit

from ...errors import CodemodeError

V5 = "v5.channel.k8s.io"
V4 = "v4.channel.k8s.io"
SUBPROTOCOLS = (V5, V4)  # offered in this order: v5 can close stdin alone, v4 only by closing the whole stream
STDIN, STDOUT, STDERR, ERROR, RESIZE, CLOSE = 0, 1, 2, 3, 4, 255
# A Status is a few hundred bytes; a megabyte-sized one is a peer trying to make the bridge parse it.
MAX_STATUS_BYTES = 64 * 1024
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class ExecProtocolError(CodemodeError):
    """The exec stream's peer broke the protocol; the message says how, and the channel ends with it."""


@dataclasses.dataclass(frozen=True)
class Message:
    """One decoded binary message: which channel, and its data."""

    channel: int
    data: bytes


@dataclasses.dataclass(frozen=True)
class ExitStatus:
    """How the command ended, as the channel-3 ``Status`` said: an exit code, or why there is none."""

    code: int
    cause: str | None = None  # set when the status says the command failed without an exit code of its own


def exec_url(apiserver: str, namespace: str, pod: str, container: str, argv: Sequence[str]) -> str:
    """The ``pods/exec`` WebSocket URL that runs ``argv`` in ``container`` with all three streams and no tty.

    Names are checked rather than escaped: a namespace or pod name that is not a DNS name cannot exist, and
    refusing it here gives a clearer error than the apiserver's 404.
    """
    if not _DNS_LABEL.match(namespace):
        raise ValueError(f"namespace {namespace!r} is not a Kubernetes name (lowercase DNS label)")
    if not _DNS_SUBDOMAIN.match(pod):
        raise ValueError(f"pod {pod!r} is not a Kubernetes name (lowercase DNS subdomain)")
    if not _DNS_LABEL.match(container):
        raise ValueError(f"container {container!r} is not a Kubernetes name (lowercase DNS label)")
    if not argv:
        raise ValueError("the exec command is empty")
    parts = urlsplit(apiserver)
    scheme = {"https": "wss", "http": "ws", "wss": "wss", "ws": "ws"}.get(parts.scheme)
    if scheme is None or not parts.netloc:
        raise ValueError(f"apiserver {apiserver!r} is not an http(s) URL")
    base = f"{scheme}://{parts.netloc}{parts.path.rstrip('/')}"
    path = f"/api/v1/namespaces/{quote(namespace)}/pods/{quote(pod)}/exec"
    query: list[tuple[str, str]] = [("container", container)]
    query += [("command", arg) for arg in argv]
    query += [("stdin", "true"), ("stdout", "true"), ("stderr", "true"), ("tty", "false")]
    return f"{base}{path}?{urlencode(query, quote_via=quote)}"


def decode_message(data: bytes, protocol: str) -> Message:
    """A binary message from the peer, checked: a channel the server may write on under ``protocol``."""
    if not data:
        raise ExecProtocolError("the exec stream sent an empty message (no channel byte)")
    channel = data[0]
    allowed = (STDOUT, STDERR, ERROR, CLOSE) if protocol == V5 else (STDOUT, STDERR, ERROR)
    if channel not in allowed:
        raise ExecProtocolError(f"the exec stream sent a message on channel {channel}, which a server never writes")
    if channel == CLOSE and (len(data) != 2 or data[1] not in (STDOUT, STDERR, ERROR)):
        raise ExecProtocolError("the exec stream sent a malformed close message (v5 channel 255)")
    return Message(channel, data[1:])


def encode_message(channel: int, data: bytes) -> bytes:
    return bytes((channel,)) + data


def parse_status(data: bytes) -> ExitStatus:
    """The exit in a channel-3 ``Status``: Success is 0, NonZeroExitCode carries the code in its causes."""
    if len(data) > MAX_STATUS_BYTES:
        raise ExecProtocolError(f"the exec stream's exit status is {len(data)} bytes (limit {MAX_STATUS_BYTES})")
    try:
        status = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        raise ExecProtocolError("the exec stream's exit status is not JSON") from None
    if not isinstance(status, dict):
        raise ExecProtocolError("the exec stream's exit status is not a Status object")
    outcome = status.get("status")
    if outcome == "Success":
        return ExitStatus(0)
    if outcome != "Failure":
        raise ExecProtocolError("the exec stream's exit status is neither Success nor Failure")
    reason = status.get("reason")
    if reason == "NonZeroExitCode":
        return ExitStatus(_exit_code(status.get("details")))
    message = status.get("message")
    said = message[:200] if isinstance(message, str) else "no message"
    named = reason[:64] if isinstance(reason, str) else "no reason"
    # Not the guest's exit: the runtime could not run or follow it (e.g. the container is gone).
    return ExitStatus(255, f"the exec command failed ({named}: {said})")


def _exit_code(details: object) -> int:
    causes = details.get("causes") if isinstance(details, dict) else None
    codes = [
        cause.get("message")
        for cause in (causes if isinstance(causes, list) else [])
        if isinstance(cause, dict) and cause.get("reason") == "ExitCode"
    ]
    if len(codes) != 1 or not isinstance(codes[0], str) or not codes[0].isascii() or not codes[0].isdigit():
        raise ExecProtocolError("the exec stream's exit status names no single exit code")
    code = int(codes[0][:4])
    if not 0 < code < 256 or len(codes[0]) > 3:
        raise ExecProtocolError("the exec stream's exit code is not between 1 and 255")
    return code
