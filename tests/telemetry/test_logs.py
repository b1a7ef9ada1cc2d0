"""The JSON log's formatter and the filter that keeps secrets out of every log line, on records made here. A real
bridge's JSON log (its call, trace and span ids, and the secrets planted in its config and calls) is checked in
tests/telemetry/test_traces_e2e.py and tests/telemetry/test_prometheus_e2e.py."""

from __future__ import annotations

import json
import logging
import sys

from mcp_codemode.telemetry.logs import JsonFormatter, SecretFilter
from mcp_codemode.telemetry.tracing import CALL_ID, SPAN_IDS
from mcp_codemode.upstream.model import ServerConfig
from mcp_codemode.upstream.servers.redaction import secret_values

TOKEN = "sk-live-0123456789abcdef"


def record(message: str, *args: object, exc: bool = False) -> logging.LogRecord:
    info = None
    if exc:
        try:
            raise RuntimeError(f"failed with e-{TOKEN}")
        except RuntimeError:
            info = sys.exc_info()
    return logging.LogRecord("mcp_codemode.test", logging.WARNING, __file__, 1, message, args or None, info)


def test_one_event_per_line_with_the_call_trace_and_span_ids() -> None:
    formatter = JsonFormatter()
    quiet = json.loads(formatter.format(record("plain\nmessage %s", "here")))
    assert quiet["message"] == "plain\nmessage here" and quiet["level"] == "WARNING"
    assert quiet["logger"] == "mcp_codemode.test" and quiet["time"].endswith("+00:00")
    assert not {"call_id", "trace_id", "span_id"} & set(quiet)
    call, ids = CALL_ID.set("0123456789abcdef"), SPAN_IDS.set(("a" * 32, "b" * 16))
    try:
        line = formatter.format(record("inside a call", exc=True))
    finally:
        CALL_ID.reset(call)
        SPAN_IDS.reset(ids)
    assert "\n" not in line
    event = json.loads(line)
    assert (event["call_id"], event["trace_id"], event["span_id"]) == ("0123456789abcdef", "a" * 32, "b" * 16)
    assert "RuntimeError" in event["exception"]


def test_no_secret_reaches_a_line_in_the_message_its_arguments_or_an_exception() -> None:
    server = ServerConfig(
        name="remote", alias="remote", transport="http", source="test", url=f"https://user:pw-{TOKEN}@h/mcp?key=q-{TOKEN}",
        headers={"Authorization": f"Bearer h-{TOKEN}"}, env={"API_KEY": f"e-{TOKEN}", "DEBUG": "1"},
    )  # fmt: skip
    stdio = ServerConfig(name="local", alias="local", transport="stdio", source="test", command="srv",
                         args=("--token", f"a-{TOKEN}"))  # fmt: skip
    hidden = SecretFilter()
    hidden.hide([*secret_values(server), *secret_values(stdio), "c" * 16 + TOKEN])
    lines = []
    for made in (
        record("HTTP Request: POST %s", server.url),  # as an HTTP client logs the URL it posts to
        record("starting upstream %r: %s", "local", f"srv --token a-{TOKEN}"),
        record("header %s", f"Bearer h-{TOKEN}"),
        record("a client token %s%s", "c" * 16, TOKEN),
        record("failed", exc=True),
    ):
        assert hidden.filter(made)
        lines.append(JsonFormatter().format(made))
        lines.append(logging.Formatter("%(message)s").format(made))
    text = "\n".join(lines)
    assert TOKEN not in text and "<hidden>" in text
    assert "RuntimeError" in text  # the exception is kept, its secret hidden
