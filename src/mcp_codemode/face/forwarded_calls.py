"""A call one replica forwards to another (``POST /internal/v1/run``): its body, written once and read strictly.

Why a module of its own: the forwarding side (``replicas.SessionRouter``) and the owner's endpoint
(``replicas.PeerEndpoint``) must agree on the body, and the owner must read it as warily as a client's arguments.
The sender holds the shared token, but the bytes may still come from a confused or compromised peer, or from
whoever learned the token: a timeout of NaN slipped past the time ceiling (``NaN`` is not above anything), a
string ``reset`` was true, a body nested thousands deep raised ``RecursionError`` out of the JSON parser and the
endpoint answered 500. Every field is therefore checked for its type and range here, unknown fields are ignored
(a newer replica may send more), and whatever is wrong raises ``BadForwardedCall`` naming the field, which the
endpoint answers with 400.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import hashlib
import hmac
import json
import math
import re
import secrets
import time
from collections.abc import Callable, Mapping
from typing import Any

from ..errors import CodemodeError
from ..guest.protocol import USER_SESSION_NAME_PATTERN
from ..runs.bridge import RunRequest
from ..session_keys import BadSessionKey, SessionKey
from ..telemetry.tracing import FORWARD as FORWARD  # the forwarding span's name, for the sender (replicas.py)
from ..telemetry.tracing import Tracing

MAX_FORWARDED_BYTES = 8 << 20  # a call's code is at most 1,000,000 characters (server.MAX_CODE_CHARS)
_NAME = re.compile(USER_SESSION_NAME_PATTERN)  # a session's label, and (in its own alphabet) a principal
_MAX_SERVER_NAME = 128  # as server._servers allows
_TRACEPARENT = re.compile(r"[0-9a-f]{2}-[0-9a-f]{32}-[0-9a-f]{16}-[0-9a-f]{2}")


class BadForwardedCall(CodemodeError, ValueError):
    """A forwarded call's body that is not one this replica's peers send; the message names what is wrong."""


@dataclasses.dataclass(frozen=True)
class Forwarded:
    """Where a forwarded call runs: the session key, its label and its principal (``server.Placement``'s fields), and
    the trace context of the forwarding replica's span (``traceparent``, ``tracestate``; empty when not traced)."""

    key: SessionKey
    label: str
    owner: str
    trace: Mapping[str, str] = dataclasses.field(default_factory=dict)


def forwarded_body(place: Forwarded, request: RunRequest, tracing: Tracing | None = None) -> bytes:
    """The body the forwarding replica sends: ``place``, every field of ``request``, and the trace context of the
    current span when ``tracing`` records one (inside the signed body, so it is the sender's and nobody else's)."""
    body = {
        "key": str(place.key), "label": place.label, "owner": place.owner, "code": request.code,
        "timeout": request.timeout, "session": request.session, "reset": request.reset,
        "servers": list(request.servers),
        "files": {path: base64.b64encode(content).decode("ascii") for path, content in request.files},
    }  # fmt: skip
    carrier = tracing.carrier() if tracing is not None else {}
    if carrier:
        body["trace"] = carrier
    return json.dumps(body).encode()


def parse_forwarded(raw: bytes, max_timeout: int) -> tuple[Forwarded, RunRequest]:
    """Read a forwarded call, checked as strictly as a client's: the sender is trusted, its bytes are not."""
    try:
        body = json.loads(raw)
    except RecursionError:
        raise BadForwardedCall("not a forwarded call: the JSON is nested too deeply") from None
    except ValueError as exc:  # UnicodeDecodeError is one
        raise BadForwardedCall(f"not a forwarded call: the body is not JSON ({exc})") from None
    if not isinstance(body, dict):
        raise BadForwardedCall("not a forwarded call: the body must be a JSON object")
    owner, label = _text(body, "owner", _NAME), _text(body, "label", _NAME)
    key = SessionKey.principal(owner, label)
    try:
        sent = SessionKey.parse(_text(body, "key"))
    except BadSessionKey:
        sent = None
    if sent != key:
        raise BadForwardedCall("the session key does not match its principal and name")
    session = body.get("session")
    request = RunRequest(
        code=_text(body, "code"),
        timeout=_timeout(body.get("timeout"), max_timeout),
        session=None if session is None else _text(body, "session", _NAME),
        reset=_flag(body.get("reset", False)),
        servers=_servers(body.get("servers", [])),
        files=_files(body.get("files", {})),
    )
    return Forwarded(key, label, owner, _trace(body.get("trace", {}))), request


def _text(body: dict[str, Any], field: str, pattern: re.Pattern[str] | None = None) -> str:
    value = body.get(field)
    if not isinstance(value, str) or not value:
        raise BadForwardedCall(f"`{field}` must be a non-empty string, not {_shown(value)}")
    if pattern is not None and not pattern.fullmatch(value):
        raise BadForwardedCall(f"`{field}` must match {pattern.pattern}, not {_shown(value)}")
    return value


def _timeout(value: object, max_timeout: int) -> float | None:
    """None (the default timeout) or a finite number of seconds from 1 to the ceiling: never NaN, never a bool."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise BadForwardedCall(f"`timeout` must be a finite number of seconds or null, not {_shown(value)}")
    if not 1 <= value <= max_timeout:
        raise BadForwardedCall(f"`timeout` must be from 1 to {max_timeout} seconds, not {value!r}")
    return float(value)


def _flag(value: object) -> bool:
    if not isinstance(value, bool):
        raise BadForwardedCall(f"`reset` must be true or false, not {_shown(value)}")
    return value


def _servers(value: object) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(
        isinstance(name, str) and 0 < len(name) <= _MAX_SERVER_NAME for name in value
    ):
        raise BadForwardedCall(f"`servers` must be a list of server names, not {_shown(value)}")
    return tuple(value)


def _files(value: object) -> tuple[tuple[str, bytes], ...]:
    if not isinstance(value, dict) or not all(isinstance(path, str) and isinstance(data, str)
                                              for path, data in value.items()):  # fmt: skip
        raise BadForwardedCall(f"`files` must map paths to base64 strings, not {_shown(value)}")
    try:
        return tuple((path, base64.b64decode(data, validate=True)) for path, data in value.items())
    except binascii.Error as exc:
        raise BadForwardedCall(f"`files` holds a value that is not base64 ({exc})") from None


def _trace(value: object) -> dict[str, str]:
    """The forwarding span's context: a W3C ``traceparent`` and at most a ``tracestate`` of printable ASCII."""
    if not isinstance(value, dict) or not set(value) <= {"traceparent", "tracestate"}:
        raise BadForwardedCall(f"`trace` must hold traceparent and tracestate only, not {_shown(value)}")
    if not value:  # the forwarding replica does not trace
        return {}
    parent, state = value.get("traceparent"), value.get("tracestate", "")
    if not isinstance(parent, str) or not _TRACEPARENT.fullmatch(parent):
        raise BadForwardedCall(f"`trace.traceparent` must be a W3C traceparent, not {_shown(parent)}")
    if not isinstance(state, str) or len(state) > 512 or not state.isascii() or not state.isprintable():
        raise BadForwardedCall(
            f"`trace.tracestate` must be at most 512 printable ASCII characters, not {_shown(state)}"
        )
    return {"traceparent": parent, "tracestate": state} if state else {"traceparent": parent}


def _shown(value: object) -> str:
    """A value for an error message: its JSON type and at most 40 characters of it."""
    if value is None:
        return "null"
    kinds = {bool: "boolean", int: "number", float: "number", str: "string", list: "list"}
    text = json.dumps(value) if isinstance(value, bool | int | float | str) else ""
    shown = text if len(text) <= 40 else text[:37] + "..."
    return f"{kinds.get(type(value), 'object')} {shown}".rstrip()


# ------------------------------------------------------------------------------------------------ signed requests

SIGNATURE_HEADER = "Mcp-Codemode-Peer-Signature"
MAX_CLOCK_SKEW = 60.0  # seconds a signed call is good for either side of the receiver's clock (NTP, as Leases need)
MAX_REMEMBERED = 200_000  # signatures remembered against replay; far more than a minute of forwarded calls
_SIGNATURE = re.compile(r"^v1:(\d{1,12}):([A-Za-z0-9_-]{16,64}):([0-9a-f]{64})$")


def request_signing_key(peer_token: str) -> bytes:
    """The key that signs forwarded calls: derived, so the token itself never travels nor keys anything else."""
    return hmac.new(peer_token.encode(), b"mcp-codemode/forwarded-call/v1", hashlib.sha256).digest()


def sign_forwarded(key: bytes, body: bytes, now: float | None = None) -> str:
    """The signature header of one forwarded call: a MAC over when, a one-time nonce, and the whole body (which
    names the principal and the session), so neither can be changed and the request cannot be played again.

    Why not the bearer token it replaced: sent with every call on the cluster network, the token itself was what a
    listener took, and with it the right to act as any principal; a captured signed request is good for one call,
    once, for a minute.
    """
    stamp = int(time.time() if now is None else now)
    nonce = secrets.token_urlsafe(18)
    return f"v1:{stamp}:{nonce}:{_mac(key, stamp, nonce, body)}"


def _mac(key: bytes, stamp: int, nonce: str, body: bytes) -> str:
    message = f"{stamp}:{nonce}:".encode() + hashlib.sha256(body).digest()
    return hmac.new(key, message, hashlib.sha256).hexdigest()


class SignatureCheck:
    """The owner's side: a forwarded call is taken only with a fresh, matching signature never seen before."""

    def __init__(self, key: bytes, clock: Callable[[], float] = time.time) -> None:
        self._key = key
        self._clock = clock
        self._seen: dict[str, float] = {}  # nonce -> when it may be forgotten (its stamp is then out of the window)

    def early_refusal(self, header: str | None) -> str | None:
        """Why a request is refused before its body is read (unsigned, malformed, or out of the time window)."""
        parsed = self._parsed(header)
        return parsed if isinstance(parsed, str) else None

    def refusal(self, header: str | None, body: bytes) -> str | None:
        """Why the call is refused: its signature does not cover this body with the shared key, or was used."""
        parsed = self._parsed(header)
        if isinstance(parsed, str):
            return parsed
        stamp, nonce, mac = int(parsed[1]), parsed[2], parsed[3]
        if not hmac.compare_digest(mac, _mac(self._key, stamp, nonce, body)):
            return "the signature does not match the call (another peer token, or a changed body)"
        now = self._clock()
        if len(self._seen) >= MAX_REMEMBERED // 2:  # forget the nonces whose stamps are out of the window anyway
            self._seen = {seen: until for seen, until in self._seen.items() if until >= now}
        if nonce in self._seen:
            return "this signed call was already taken once (a replay)"
        if len(self._seen) >= MAX_REMEMBERED:
            return "too many forwarded calls in the last minute to remember; try again"
        self._seen[nonce] = stamp + 2 * MAX_CLOCK_SKEW
        return None

    def _parsed(self, header: str | None) -> re.Match[str] | str:
        """The signature's parts, or why it is refused as it stands (malformed, or signed out of the window)."""
        match = _SIGNATURE.match(header or "")
        if match is None:
            return f"a forwarded call must carry {SIGNATURE_HEADER}, signed with the replicas' shared token"
        skew = self._clock() - int(match[1])
        if abs(skew) > MAX_CLOCK_SKEW:
            return (f"the call was signed {skew:+.0f} s from this replica's clock, outside ±{MAX_CLOCK_SKEW:g} s: a "
                    "stale or replayed request, or clocks out of sync (run NTP on the nodes)")  # fmt: skip
        return match
