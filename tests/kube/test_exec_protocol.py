"""The pure parts of the pods/exec protocol (URL, message demux, Status parsing), with hostile input. No
Kubernetes is involved: these are rules about bytes."""

from __future__ import annotations

import json
from urllib.parse import parse_qsl, urlsplit

import pytest

from mcp_codemode.sandbox.kube.exec_protocol import (
    MAX_STATUS_BYTES,
    V4,
    V5,
    ExecProtocolError,
    ExitStatus,
    decode_message,
    exec_url,
    parse_status,
)


def test_exec_url_repeats_command_and_asks_for_three_streams_without_tty() -> None:
    url = exec_url("https://k8s.example:6443/", "codemode", "sandbox-1", "guest", ["python3", "-c", "a b&c=d"])
    parts = urlsplit(url)
    assert (parts.scheme, parts.netloc) == ("wss", "k8s.example:6443")
    assert parts.path == "/api/v1/namespaces/codemode/pods/sandbox-1/exec"
    assert parse_qsl(parts.query) == [
        ("container", "guest"), ("command", "python3"), ("command", "-c"), ("command", "a b&c=d"),
        ("stdin", "true"), ("stdout", "true"), ("stderr", "true"), ("tty", "false"),
    ]  # fmt: skip


def test_exec_url_keeps_an_apiserver_path_prefix_and_maps_http_to_ws() -> None:
    url = exec_url("http://127.0.0.1:8001/proxy", "ns", "p", "c", ["x"])
    assert url.startswith("ws://127.0.0.1:8001/proxy/api/v1/namespaces/ns/pods/p/exec?")


@pytest.mark.parametrize(
    ("namespace", "pod", "container", "argv", "apiserver"),
    [
        ("../kube-system", "p", "c", ["x"], "https://a"),
        ("ns", "p/../../secrets", "c", ["x"], "https://a"),
        ("ns", "p", "C", ["x"], "https://a"),
        ("ns", "p", "c", [], "https://a"),
        ("ns", "p", "c", ["x"], "file:///etc/passwd"),
        ("ns", "p", "c", ["x"], "https://"),
    ],
)
def test_exec_url_refuses_names_that_cannot_exist(namespace, pod, container, argv, apiserver) -> None:
    with pytest.raises(ValueError, match=r"not a Kubernetes name|is empty|not an http"):
        exec_url(apiserver, namespace, pod, container, argv)


def test_messages_demux_by_their_channel_byte() -> None:
    assert decode_message(b"\x01hello", V4) == decode_message(b"\x01hello", V5)
    message = decode_message(b"\x02oops", V4)
    assert (message.channel, message.data) == (2, b"oops")
    assert decode_message(b"\xff\x01", V5).data == b"\x01"
    assert decode_message(b"\x01", V4).data == b""


@pytest.mark.parametrize(
    ("data", "protocol"),
    [
        (b"", V5),  # no channel byte
        (b"\x00stdin from the server", V5),  # a server never writes the client's stdin
        (b"\x04{}", V5),  # resize is client -> server
        (b"\x07junk", V4),
        (b"\xff\x00", V4),  # close exists only in v5
        (b"\xff", V5),  # close names no channel
        (b"\xff\x01\x02", V5),
        (b"\xff\x09", V5),
    ],
)
def test_hostile_messages_are_refused_with_a_reason(data: bytes, protocol: str) -> None:
    with pytest.raises(ExecProtocolError, match="exec stream"):
        decode_message(data, protocol)


def _failure(*causes: object, reason: str = "NonZeroExitCode") -> bytes:
    return json.dumps({"status": "Failure", "reason": reason, "details": {"causes": list(causes)}}).encode()


def test_status_success_is_zero_and_nonzero_carries_the_code() -> None:
    assert parse_status(b'{"kind":"Status","status":"Success"}') == ExitStatus(0)
    assert parse_status(_failure({"reason": "ExitCode", "message": "137"})) == ExitStatus(137)


def test_a_failure_without_an_exit_code_is_an_exit_of_unknown_code_with_a_cause() -> None:
    status = parse_status(json.dumps({"status": "Failure", "reason": "InternalError", "message": "gone"}).encode())
    assert status.code == 255 and status.cause is not None and "InternalError: gone" in status.cause


@pytest.mark.parametrize(
    "data",
    [
        b"not json",
        b"\xff\xfe",
        b"[]",
        b'{"status": "Maybe"}',
        b"[" * 100_000,
        b'{"status":"Success","pad":"' + b"x" * MAX_STATUS_BYTES + b'"}',
        _failure(),
        _failure({"reason": "ExitCode", "message": "abc"}),
        _failure({"reason": "ExitCode", "message": "0"}),
        _failure({"reason": "ExitCode", "message": "256"}),
        _failure({"reason": "ExitCode", "message": "-1"}),
        _failure({"reason": "ExitCode", "message": "9" * 5000}),
        _failure({"reason": "ExitCode", "message": "١٢"}),  # digits Python's int() takes, not ASCII
        _failure({"reason": "ExitCode", "message": "1"}, {"reason": "ExitCode", "message": "2"}),
        _failure({"reason": "ExitCode", "message": 1}),
        json.dumps({"status": "Failure", "reason": "NonZeroExitCode", "details": "x"}).encode(),
    ],
)
def test_hostile_statuses_are_refused_with_a_reason(data: bytes) -> None:
    with pytest.raises(ExecProtocolError, match="exit"):
        parse_status(data)
