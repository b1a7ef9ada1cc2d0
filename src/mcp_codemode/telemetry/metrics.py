"""Every metric the bridge exposes, defined once: name, help, label set, buckets, and the values labels may take.

One module, so the names an operator's dashboards and alerts depend on can be read (and changed) in one place, and
docs/observability.md checked against it. Names follow Prometheus conventions (base units in the name: seconds,
bytes; counters end in ``_total``) and take the MCP semantic conventions' names where they define one
(``mcp.server.operation.duration`` is ``mcp_server_operation_duration_seconds`` here, ``mcp.client.operation
.duration`` the upstream calls' ``mcp_client_operation_duration_seconds``).

Labels are closed sets (the tuples below) or names the operator configured: an upstream server's name, and a tool
its server listed (at most ``MAX_TOOLS_PER_SERVER`` per server, the rest counted as ``other``). Never a session
name, a principal, code or an argument: those are unbounded, chosen by clients or their code, and may be secret.

The buckets span a warm call (about a millisecond, so the first buckets are sub-millisecond) to the longest run a
call may be given (minutes). Histograms cost one series per bucket and label set, so the upstream latency is kept
per server and tool but not per outcome; the outcome is on the counter beside it.
"""

from __future__ import annotations

from typing import Final, Literal, NamedTuple, get_args

from prometheus_client import CollectorRegistry, Counter, Histogram

from ..upstream.servers.state import Status

# Seconds: a warm call takes about a millisecond, a long run minutes (MCP_BRIDGE_MAX_TIMEOUT, 120 s by default).
DURATION_BUCKETS: Final = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60,
                           120, 300)  # fmt: skip
# Seconds to start a sandbox: tens of milliseconds for bubblewrap, hundreds for a container, seconds for a pod.
START_BUCKETS: Final = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
# Bytes of a result: a line of text, up to MCP_BRIDGE_OUTPUT_LIMIT's ceiling with images beside it.
BYTES_BUCKETS: Final = (256, 1024, 4096, 16384, 65536, 262144, 1 << 20, 4 << 20, 16 << 20)

# How a run_python call ended. ``refused`` and ``tool_error``: the code stopped on a PolicyError (or
# ApprovalDenied) or a ToolError it did not catch; ``crashed``: its sandbox died (out of memory, killed);
# ``bridge_error``: the bridge could not run it (no sandbox backend, every session busy).
CallOutcome = Literal["ok", "code_error", "timeout", "cancelled", "refused", "tool_error", "crashed", "bridge_error"]
CALL_OUTCOMES: Final[tuple[CallOutcome, ...]] = get_args(CallOutcome)
# Why a session was closed: ``evicted`` to make room under MCP_BRIDGE_MAX_SESSIONS, ``expired`` idle, ``ended``
# with its client's connection, ``moved`` to another replica (taken over there, or from here after a takeover).
SessionEnd = Literal["evicted", "expired", "ended", "moved"]
SESSION_ENDS: Final[tuple[SessionEnd, ...]] = get_args(SessionEnd)
# How one use of an upstream server ended: the audit log's outcomes (runs/audit.py), one for one.
UpstreamOutcome = Literal["ok", "tool_error", "refused", "error", "timeout", "cancelled"]
UPSTREAM_OUTCOMES: Final[tuple[UpstreamOutcome, ...]] = get_args(UpstreamOutcome)
UPSTREAM_METHODS: Final = {"tool": "tools/call", "resource": "resources/read", "prompt": "prompts/get"}
# An ask_tools call: the user said yes or no when asked; ``unasked``: the client could not be asked (no elicitation,
# a forwarded call, a call too long to show, asking failed), so it was refused; ``remembered``: an earlier "allow for
# the session" let it pass without asking.
ApprovalDecision = Literal["granted", "denied", "unasked", "remembered"]
APPROVAL_DECISIONS: Final[tuple[ApprovalDecision, ...]] = get_args(ApprovalDecision)
SERVER_STATES: Final[tuple[Status, ...]] = get_args(Status)  # an upstream server's connection: idle, connecting, ...
SANDBOX_START_OUTCOMES: Final = ("ok", "failed")
MAX_TOOLS_PER_SERVER: Final = 200
OTHER_TOOL: Final = "other"


class Family(NamedTuple):
    """A metric read when Prometheus scrapes (``snapshot.py``), not kept between scrapes."""

    name: str
    help: str
    labels: tuple[str, ...] = ()


BUILD_INFO: Final = Family("mcp_codemode_build_info", "The bridge's version and sandbox backend (value 1)",
                           ("version", "backend"))  # fmt: skip
SESSIONS: Final = Family(
    "mcp_codemode_sessions", "Named sessions alive now (each holds a sandbox or gets one on its next call)"
)
SESSIONS_MAX: Final = Family("mcp_codemode_sessions_max", "The cap on sessions (MCP_BRIDGE_MAX_SESSIONS)")
SANDBOXES: Final = Family("mcp_codemode_sandboxes", "Sandboxes that exist now: in sessions, pooled, starting, closing")
POOL_READY: Final = Family("mcp_codemode_warm_pool_ready", "Started sandboxes waiting in the warm pool")
POOL_TARGET: Final = Family("mcp_codemode_warm_pool_target", "How many the warm pool keeps (MCP_BRIDGE_WARM_POOL)")
SERVER_STATE: Final = Family("mcp_codemode_upstream_server_state",
                             "1 for the state each upstream server's connection is in, 0 for the others",
                             ("server", "state"))  # fmt: skip
SERVER_RESTARTS: Final = Family(
    "mcp_codemode_upstream_server_restarts", "Times each upstream server was started again after its first", ("server",)
)


class Metrics:
    """The metrics that are kept between scrapes, on one registry (each bridge has its own: several bridges in
    one process, as in the tests, never share a series)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        def counter(name: str, text: str, labels: tuple[str, ...] = ()) -> Counter:
            return Counter(name, text, labels, registry=registry)

        def histogram(name: str, text: str, labels: tuple[str, ...], buckets: tuple[float, ...]) -> Histogram:
            return Histogram(name, text, labels, registry=registry, buckets=buckets)

        self.calls = counter("mcp_codemode_calls_total", "run_python calls that ended, by outcome", ("outcome",))
        self.call_duration = histogram(
            "mcp_server_operation_duration_seconds",
            "Seconds from a tools/call's arrival to its result, where it ran (MCP semantic conventions)",
            ("mcp_method_name", "outcome"),
            DURATION_BUCKETS,
        )
        self.sandbox_wait = histogram(
            "mcp_codemode_sandbox_wait_seconds",
            "Seconds a call waited for its session's sandbox: its turn in the session, a start or a pooled one",
            (),
            DURATION_BUCKETS,
        )
        self.output_bytes = histogram(
            "mcp_codemode_output_bytes", "Bytes of each run_python result sent back: its text and images", (),
            BYTES_BUCKETS,
        )  # fmt: skip
        self.sessions_closed = counter("mcp_codemode_sessions_closed_total", "Sessions closed, by why", ("reason",))
        self.sandbox_starts = counter(
            "mcp_codemode_sandbox_starts_total", "Sandboxes started, by backend and outcome", ("backend", "outcome")
        )
        self.sandbox_start_duration = histogram(
            "mcp_codemode_sandbox_start_duration_seconds",
            "Seconds a sandbox took to start and answer, by backend",
            ("backend",),
            START_BUCKETS,
        )
        self.upstream_calls = counter(
            "mcp_codemode_upstream_calls_total",
            "Uses of upstream servers by sandboxed code (tool calls, resource reads, prompt gets), by outcome",
            ("mcp_method_name", "server", "tool", "outcome"),
        )
        self.upstream_duration = histogram(
            "mcp_client_operation_duration_seconds",
            "Seconds each use of an upstream server took, refusals included (MCP semantic conventions)",
            ("mcp_method_name", "server", "tool"),
            DURATION_BUCKETS,
        )
        self.approvals = counter(
            "mcp_codemode_approvals_total", "Calls ask_tools names, by what the user decided", ("decision",)
        )
        self.forwarded = counter("mcp_codemode_forwarded_calls_total", "Calls this replica sent to another replica")
        self.takeovers = counter(
            "mcp_codemode_session_takeovers_total", "Sessions this replica took over from a replica that was gone"
        )
