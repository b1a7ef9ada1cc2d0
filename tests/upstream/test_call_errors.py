"""A server's JSON-RPC error as sandboxed code gets it: its code and data kept, redacted and bounded, and the URL a
URL-elicitation-required error (-32042) asks the person to open named in the message."""

from __future__ import annotations

from mcp_codemode.upstream.errors import MAX_ERROR_DATA, Redaction, UpstreamCallError

PREREQUISITE = {"mode": "url", "url": "https://auth.example/start", "message": "Sign in", "elicitationId": "e-1"}


def test_a_url_elicitation_required_error_names_the_url_and_keeps_its_data() -> None:
    error = UpstreamCallError("gh", "tools/call", -32042, "needs a browser", {"elicitations": [PREREQUISITE]})
    assert "must first open https://auth.example/start (Sign in) in a browser" in str(error)
    assert error.sandbox_data == {"elicitations": [PREREQUISITE]}


def test_other_errors_say_no_browser_step() -> None:
    error = UpstreamCallError("gh", "tools/call", -32602, "bad params", {"elicitations": [PREREQUISITE]})
    assert "browser" not in str(error)
    assert UpstreamCallError("gh", "tools/call", -32042, "x", {"elicitations": "nonsense"}).sandbox_data is not None


def test_error_data_is_redacted_and_bounded_for_the_sandbox() -> None:
    redaction = Redaction.of(["sekrit-token-1234"])
    error = UpstreamCallError(
        "gh", "tools/call", -32000, "no", {"echo": "Bearer sekrit-token-1234"}, redaction=redaction
    )
    assert error.sandbox_data == {"echo": "Bearer <hidden>"}
    assert error.data == {"echo": "Bearer sekrit-token-1234"}  # the host keeps the server's own words
    assert UpstreamCallError("gh", "tools/call", -32000, "no", "x" * MAX_ERROR_DATA).sandbox_data is None
    assert UpstreamCallError("gh", "tools/call", -32000, "no", {"n": float("nan")}).sandbox_data is None
    assert UpstreamCallError("gh", "tools/call", -32000, "no", None).sandbox_data is None
