"""The bridge's log as an operator's tools read it: one JSON object per line, joined to the audit log and the traces
by the call id, and never holding a secret the bridge was configured with.

``JsonFormatter`` writes each event with the ``call_id`` of the ``run_python`` call it happened in and the
``trace_id`` and ``span_id`` of the span that was current (``tracing.py`` keeps both in context variables, so a log
call names neither): the audit line of an upstream call carries the same call id and, when tracing is on, the same
trace id, so an operator goes from a log line to the call's audit lines and its trace, and back.

``SecretFilter`` sits on the log's handler whatever the format, and replaces every secret the bridge knows of with
``<hidden>`` before a line is written: its own tokens, and each configured upstream server's env values, header
values and credential arguments (``hide``; the bridge adds its servers' as it learns them). The bridge's own lines
name no secret already; this also covers the libraries' (an HTTP client logs the URL it posts to, query string and
all), and a secret that reaches a line by a path nobody thought of.
"""

from __future__ import annotations

import datetime
import json
import logging
import re
from collections.abc import Iterable

from .tracing import CALL_ID, SPAN_IDS

HIDDEN = "<hidden>"
MIN_SECRET = 4  # as the hub's redaction: shorter values ("1", "on") would garble every line and guard nothing


class JsonFormatter(logging.Formatter):
    """One event per line: time, level, logger, message, the call, trace and span ids, and an exception's trace."""

    def format(self, record: logging.LogRecord) -> str:
        event: dict[str, object] = {
            "time": datetime.datetime.fromtimestamp(record.created, datetime.UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        call = CALL_ID.get()
        if call:
            event["call_id"] = call
        trace_id, span_id = SPAN_IDS.get()
        if trace_id:
            event["trace_id"] = trace_id
            event["span_id"] = span_id
        if record.exc_info:
            event["exception"] = self.formatException(record.exc_info)
        elif record.exc_text:
            event["exception"] = record.exc_text
        return json.dumps(event, ensure_ascii=False, default=str)


class SecretFilter(logging.Filter):
    """Replaces every secret it was told of, in a record's message and arguments, before any handler writes it."""

    def __init__(self) -> None:
        super().__init__()
        self._secrets: set[str] = set()
        self._pattern: re.Pattern[str] | None = None

    def hide(self, values: Iterable[str]) -> None:
        """Hide ``values`` from now on (those shorter than ``MIN_SECRET`` are left: they would garble every line)."""
        fresh = {value for value in values if len(value) >= MIN_SECRET} - self._secrets
        if not fresh:
            return
        self._secrets |= fresh
        ordered = sorted(self._secrets, key=len, reverse=True)  # a secret that holds another is hidden whole
        self._pattern = re.compile("|".join(re.escape(value) for value in ordered))

    def clean(self, text: str) -> str:
        """``text`` with every secret hidden: for what a person reads elsewhere than the log (the web console)."""
        pattern = self._pattern
        return text if pattern is None else pattern.sub(HIDDEN, text)

    def filter(self, record: logging.LogRecord) -> bool:
        pattern = self._pattern
        if pattern is None:
            return True
        message = record.getMessage()
        cleaned = pattern.sub(HIDDEN, message)
        if cleaned != message:
            record.msg, record.args = cleaned, None
        if record.exc_info and not record.exc_text:
            record.exc_text = logging.Formatter().formatException(record.exc_info)
        if record.exc_text:
            record.exc_text = pattern.sub(HIDDEN, record.exc_text)
            record.exc_info = None  # the text stands for it, hidden
        return True


# The process's one filter: logging is the process's, and the bridge (which learns its servers' secrets) is built
# after the log is configured, by the command line, a test or a benchmark.
SECRETS = SecretFilter()


def hide_in_logs(values: Iterable[str]) -> None:
    """Never let ``values`` reach a log line (``SECRETS``, on every handler the command line configures)."""
    SECRETS.hide(values)


def without_secrets(text: str) -> str:
    """``text`` with every secret the log hides hidden too (the servers' env, header, URL and argument secrets)."""
    return SECRETS.clean(text)
