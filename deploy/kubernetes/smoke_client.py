#!/usr/bin/env python3
"""The face-facing half of smoke.sh: a small MCP client, and what it reads with kubectl about what the face left.

Standard library only, Python 3.8 or newer: the operator's python3 has no MCP SDK, and installing one to check a
deployment would be one more thing to trust. It speaks the handshake era of Streamable HTTP (2025-11-25: initialize,
then Mcp-Session-Id on every request; answers as JSON or as server-sent events), which every face answers.

    smoke_client.py facts < deployment.json      the face Deployment's facts smoke.sh needs, on one line
    smoke_client.py pods < pods.json             the face pods that are Ready, on one line
    smoke_client.py product URL                  through the face Service (a port-forward to it at URL)
    smoke_client.py replicas URL_A POD_A URL_B POD_B   two replicas: each answers, B forwards to A, A deleted

The bearer token comes from MCP_CODEMODE_SMOKE_TOKEN, else from the Secret ``--token-secret NAME/KEY`` (the first of
its comma-separated tokens); never from the command line, where ps shows it. kubectl is $KUBECTL (default kubectl),
always with ``-n --namespace``. Each check prints ``ok``, ``FAIL`` or ``skip`` and a sentence, like smoke.sh; the exit
status is 0 when nothing failed, 1 when a check failed, 2 for bad usage.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Callable
from typing import TYPE_CHECKING, Any
from urllib.parse import urlsplit

if TYPE_CHECKING:  # annotations only: they stay strings at run time, so Python 3.8 reads this file too
    Json = dict[str, Any]

PROTOCOL = "2025-11-25"
MANAGED_BY = "app.kubernetes.io/managed-by=mcp-codemode"
OWNER_ANNOTATION = "mcp-codemode.dev/owner-replica"
POD_NAME_ANNOTATION = "agents.x-k8s.io/pod-name"
REPLICA_LEASE_PREFIX = "mcp-replica-"
# A 1x1 PNG: runtime.show recognises an image by its first bytes, and the face sends it back as image content.
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg=="
)
TAKEN_OVER = "which stopped answering, so its state was lost"
HANDED_OVER = "which shut down (a rollout, a drain or a scale-down), so its state was lost"
UNREACHABLE = "ReplicaUnreachable"


class Report:
    """The ok/FAIL/skip lines, counted."""

    def __init__(self) -> None:
        self.failed = 0

    def check(self, passed: bool, text: str) -> bool:
        self.failed += not passed
        print(("ok    " if passed else "FAIL  ") + text, flush=True)
        return passed

    def skip(self, text: str) -> None:
        print("skip  " + text, flush=True)


class McpError(Exception):
    """A JSON-RPC error, or an HTTP answer that is not MCP."""


class McpSession:
    """One handshake-era MCP session over Streamable HTTP."""

    def __init__(self, url: str, token: str, timeout: float) -> None:
        parts = urlsplit(url)
        self.host, self.port, self.path = parts.hostname or "127.0.0.1", parts.port or 80, parts.path or "/mcp"
        self.token = token
        self.timeout = timeout
        self.session_id = ""
        self.ids = 0

    def _headers(self) -> dict[str, str]:
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        if self.token:
            headers["Authorization"] = "Bearer " + self.token
        if self.session_id:
            headers.update({"Mcp-Session-Id": self.session_id, "MCP-Protocol-Version": PROTOCOL})
        return headers

    def _exchange(self, method: str, body: Json | None) -> tuple[int, Json, Json | None]:
        """Send one request; the HTTP status, its headers and, for a request with an id, the JSON-RPC answer to it
        (the one that carries its id: progress and log notifications before it are passed over)."""
        connection = http.client.HTTPConnection(self.host, self.port, timeout=self.timeout)
        try:
            payload = json.dumps(body).encode() if body is not None else None
            connection.request(method, self.path, body=payload, headers=self._headers())
            answer = connection.getresponse()
            headers = {key.lower(): value for key, value in answer.getheaders()}
            wanted = body.get("id") if body is not None else None
            if wanted is None or answer.status >= 300:
                return answer.status, headers, _json_or_none(answer.read())
            if headers.get("content-type", "").startswith("text/event-stream"):
                return answer.status, headers, _answer_in_events(answer, wanted)
            return answer.status, headers, _json_or_none(answer.read())
        finally:
            connection.close()

    def request(self, method: str, params: Json) -> Json:
        self.ids += 1
        status, headers, answer = self._exchange("POST", {"jsonrpc": "2.0", "id": self.ids, "method": method,
                                                          "params": params})  # fmt: skip
        if method == "initialize" and headers.get("mcp-session-id"):
            self.session_id = headers["mcp-session-id"]
        if status != 200 or answer is None:
            raise McpError(f"{method}: HTTP {status} {json.dumps(answer)[:300] if answer else ''}".strip())
        if "error" in answer:
            raise McpError(f"{method}: {answer['error'].get('message')} (code {answer['error'].get('code')})")
        result: Json = answer.get("result") or {}
        return result

    def open(self) -> Json:
        """initialize, then notifications/initialized; the server's answer to initialize."""
        info = {"name": "mcp-codemode-smoke", "version": "1"}
        result = self.request("initialize", {"protocolVersion": PROTOCOL, "capabilities": {}, "clientInfo": info})
        status, _, _ = self._exchange("POST", {"jsonrpc": "2.0", "method": "notifications/initialized"})
        if status not in (200, 202):
            raise McpError(f"notifications/initialized: HTTP {status}")
        return result

    def run_python(self, code: str, session: str = "", meta: Json | None = None) -> Json:
        arguments: Json = {"code": code}
        if session:
            arguments["session"] = session
        params: Json = {"name": "run_python", "arguments": arguments}
        if meta:
            params["_meta"] = meta
        return self.request("tools/call", params)

    def close(self) -> int:
        """End the MCP session (HTTP DELETE); the status."""
        status, _, _ = self._exchange("DELETE", None)
        return status

    def status_of_a_request(self) -> int:
        """The HTTP status a request on this session gets now (404 once it ended)."""
        self.ids += 1
        status, _, _ = self._exchange("POST", {"jsonrpc": "2.0", "id": self.ids, "method": "tools/list"})
        return status


def _json_or_none(data: bytes) -> Json | None:
    try:
        found = json.loads(data) if data.strip() else None
    except ValueError:
        return {"text": data.decode("utf-8", "replace")[:300]}
    return found if isinstance(found, dict) else None


def _answer_in_events(stream: Any, wanted: object) -> Json | None:
    """Read server-sent events until the JSON-RPC message that answers ``wanted``."""
    data: list[str] = []
    for raw in stream:
        line = raw.decode("utf-8").rstrip("\r\n")
        if line.startswith("data:"):
            data.append(line[6:] if line.startswith("data: ") else line[5:])
        elif not line and data:
            message = json.loads("\n".join(data))
            data = []
            if (
                isinstance(message, dict)
                and message.get("id") == wanted
                and ("result" in message or "error" in message)
            ):
                return message
    return None


def text_of(result: Json) -> str:
    return "\n".join(item.get("text", "") for item in result.get("content") or [] if item.get("type") == "text")


def error_type(result: Json) -> str:
    if not result.get("isError"):
        return ""
    error = (result.get("structuredContent") or {}).get("error") or {}
    return str(error.get("type") or "error")


def kubectl(namespace: str, *args: str) -> Json:
    """``kubectl -n NAMESPACE ARGS -o json``, parsed; raises McpError with kubectl's words when it fails."""
    command = [os.environ.get("KUBECTL") or "kubectl", "-n", namespace, *args, "-o", "json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if done.returncode != 0:
        raise McpError(f"{' '.join(command[:1] + list(args))}: {done.stderr.strip()[:300]}")
    found: Json = json.loads(done.stdout)
    return found


def deployment_facts(deployment: Json) -> list[str]:
    """The face's service account, the runtime class it requires, where its bearer tokens are (Secret and key),
    its ready replicas, its pods' label selector and its MCP port: "-" for what it does not say."""
    pod = deployment["spec"]["template"]["spec"]
    container = next((c for c in pod["containers"] if c.get("name") == "face"), pod["containers"][0])
    env = {e["name"]: e for e in container.get("env") or []}
    runtime_class = (env.get("MCP_BRIDGE_KUBE_RUNTIME_CLASS") or {}).get("value") or "gvisor"
    secret = ((env.get("MCP_BRIDGE_HTTP_TOKEN") or {}).get("valueFrom") or {}).get("secretKeyRef") or {}
    labels = (deployment["spec"].get("selector") or {}).get("matchLabels") or {}
    ports = [p["containerPort"] for p in container.get("ports") or [] if p.get("name") == "http"]
    return [
        pod.get("serviceAccountName") or "default",
        runtime_class,
        secret.get("name") or "-",
        secret.get("key") or "-",
        str((deployment.get("status") or {}).get("readyReplicas") or 0),
        ",".join(f"{k}={v}" for k, v in sorted(labels.items())) or "-",
        str(ports[0] if ports else 8765),
    ]


def ready_pods(pods: Json) -> list[str]:
    """The names of the pods that are Ready and not being deleted."""
    ready = []
    for pod in pods.get("items") or []:
        conditions = (pod.get("status") or {}).get("conditions") or []
        if pod["metadata"].get("deletionTimestamp"):
            continue
        if any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions):
            ready.append(pod["metadata"]["name"])
    return sorted(ready)


def claim_of_pod(claims: Json, sandboxes: Json, pod: str) -> str | None:
    """The claim whose Sandbox runs ``pod`` (a pod's hostname is its name, cut at 63 characters)."""
    pods = {}
    for sandbox in sandboxes.get("items") or []:
        meta = sandbox["metadata"]
        pods[meta["name"]] = (meta.get("annotations") or {}).get(POD_NAME_ANNOTATION) or meta["name"]
    for claim in claims.get("items") or []:
        name = ((claim.get("status") or {}).get("sandbox") or {}).get("name")
        if name and pods.get(name, name)[:63] == pod:
            return str(claim["metadata"]["name"])
    return None


def owned_by(claims: Json, replica: str) -> list[str]:
    return sorted(c["metadata"]["name"] for c in claims.get("items") or []
                  if (c["metadata"].get("annotations") or {}).get(OWNER_ANNOTATION) == replica)  # fmt: skip


def liveness_lease(leases: Json, replica: str) -> list[str]:
    return [lease["metadata"]["name"] for lease in leases.get("items") or []
            if lease["metadata"]["name"].startswith(REPLICA_LEASE_PREFIX)
            and (lease.get("spec") or {}).get("holderIdentity") == replica]  # fmt: skip


def after_owner_deleted(result: Json, owner: str) -> tuple[str, str]:
    """What the first answer after the owner's pod was deleted shows: "takeover" (the session's Lease lapsed and was
    taken, with the notice), "handed-over" (the owner handed its sessions over as it stopped: taken at once, with
    the notice), "released" (a face of an older release gave its Leases up as it stopped: a fresh session, no notice),
    "kept" (the old state answered: the owner was not gone) or "error"; and the answer's text."""
    text = text_of(result)
    if error_type(result):
        return "error", text
    if f"lived on replica {owner}, {TAKEN_OVER}" in text:
        return ("takeover" if "False" in text else "error"), text
    if f"lived on replica {owner}, {HANDED_OVER}" in text:
        return ("handed-over" if "False" in text else "error"), text
    return ("released" if text.strip() == "False" else "kept"), text


def wait_until(check: Callable[[], bool], seconds: float, pause: float = 2.0) -> bool:
    end = time.monotonic() + seconds
    while not check():
        if time.monotonic() > end:
            return False
        time.sleep(pause)
    return True


def bearer_token(args: argparse.Namespace) -> str:
    token = os.environ.get("MCP_CODEMODE_SMOKE_TOKEN", "").strip()
    if token or not args.token_secret or args.token_secret.startswith("-"):
        return token
    name, _, key = args.token_secret.partition("/")
    secret = kubectl(args.namespace, "get", "secret", name)
    tokens = base64.b64decode((secret.get("data") or {}).get(key, "")).decode()
    return tokens.split(",")[0].strip()


def session_checks(mcp: McpSession, report: Report) -> str:
    """What a client does with a session: the handshake, state across two calls, a file in with a call and out as a
    resource link, an image; the hostname of the sandbox it ran in (a pod's hostname is its name)."""
    started = time.monotonic()
    hello = mcp.open()
    server = (hello.get("serverInfo") or {}).get("name")
    report.check(bool(mcp.session_id), f"MCP handshake: protocol {hello.get('protocolVersion')}, server {server}")
    tools = [tool.get("name") for tool in mcp.request("tools/list", {}).get("tools") or []]
    report.check("run_python" in tools, f"tools/list offers run_python ({', '.join(map(str, tools))})")
    first = mcp.run_python("import socket\nx = 41\nsocket.gethostname()")
    pod = text_of(first).strip().strip("'\"")
    second = mcp.run_python("x + 1")
    took = (time.monotonic() - started) * 1000
    report.check(not error_type(first) and text_of(second) == "42",
                 f"state across two run_python calls: x + 1 gave {text_of(second)!r} ({took:.0f} ms with the "
                 f"handshake and the claim; sandbox {pod})")  # fmt: skip
    marker = uuid.uuid4().hex
    files = {"codemode/files": [{"path": "smoke/in.txt", "content": marker}]}
    code = ("import os\nos.makedirs('smoke', exist_ok=True)\n"
            "open('smoke/out.txt', 'w').write(open('smoke/in.txt').read()[::-1])\n"
            "runtime.share_file('smoke/out.txt')\n'written'")  # fmt: skip
    shared = mcp.run_python(code, meta=files)
    links = [item for item in shared.get("content") or [] if item.get("type") == "resource_link"]
    read = mcp.request("resources/read", {"uri": links[0]["uri"]}) if links else {}
    contents = [item.get("text") for item in read.get("contents") or []]
    where = links[0]["uri"] if links else "no link"
    report.check(contents == [marker[::-1]], f"a file in with the call, out as a resource link ({where}), read back "
                 f"{'as written' if contents == [marker[::-1]] else repr(contents)[:100]}")  # fmt: skip
    png = base64.b64encode(PNG).decode()
    shown = mcp.run_python(f"import base64\nruntime.show(base64.b64decode({png!r}))\n'shown'")
    images = [item for item in shown.get("content") or [] if item.get("type") == "image"]
    same = bool(images) and base64.b64decode(images[0].get("data", "")) == PNG
    report.check(same, f"an image from runtime.show comes back as image content ({len(images)} image(s), "
                 f"{images[0].get('mimeType') if images else '-'})")  # fmt: skip
    return pod


def live_claims(namespace: str) -> list[str]:
    return [c["metadata"]["name"] for c in kubectl(namespace, "get", "sandboxclaims").get("items") or []]


def claim_serving(namespace: str, pod: str) -> str | None:
    claims = kubectl(namespace, "get", "sandboxclaims", "-l", MANAGED_BY)
    return claim_of_pod(claims, kubectl(namespace, "get", "sandboxes"), pod)


def product(args: argparse.Namespace, report: Report) -> None:
    """Through the face Service: a session's life (``session_checks``), and its end (DELETE) taking its claim."""
    mcp = McpSession(args.url, bearer_token(args), args.timeout)
    pod = session_checks(mcp, report)
    claim = claim_serving(args.namespace, pod)
    if not report.check(claim is not None, f"the session runs in claim {claim} (its Sandbox's pod is {pod})"):
        mcp.close()
        return
    status = mcp.close()
    after = mcp.status_of_a_request()
    report.check(status in (200, 202, 204) and after == 404,
                 f"the session ended with DELETE (HTTP {status}); a request on it now gets HTTP {after}")  # fmt: skip
    ended = time.monotonic()
    gone = wait_until(lambda: claim not in live_claims(args.namespace), args.wait, 0.5)
    report.check(gone, f"its claim {claim} is gone {(time.monotonic() - ended) * 1000:.0f} ms after the end" if gone
                 else f"its claim {claim} is still there {args.wait:g} s after the session ended")  # fmt: skip


def replicas(args: argparse.Namespace, report: Report) -> None:
    """Two replicas: a call through each pod, a call through B of a session A holds (forwarded: it sees A's state),
    then A's pod deleted: B serves the session, says so when it took it over, and A's claims and liveness go."""
    token = bearer_token(args)
    on_a, on_b = McpSession(args.url_a, token, args.timeout), McpSession(args.url_b, token, args.timeout)
    for name, mcp in ((args.pod_a, on_a), (args.pod_b, on_b)):  # each in its connection's own session
        mcp.open()
        answer = mcp.run_python("6 * 7")
        report.check(text_of(answer) == "42", f"a call through pod {name} runs: 6 * 7 gave {text_of(answer)!r}")
    session = "smoke-" + uuid.uuid4().hex[:12]
    on_a.run_python("x = 41", session)
    forwarded = on_b.run_python("x + 1", session)
    report.check(text_of(forwarded) == "42", f"a call through pod {args.pod_b} in session {session}, held by "
                 f"{args.pod_a}, is forwarded there: x + 1 gave {text_of(forwarded)!r}")  # fmt: skip
    on_a.close()
    command = [
        os.environ.get("KUBECTL") or "kubectl",
        "-n",
        args.namespace,
        "delete",
        "pod",
        args.pod_a,
        "--wait=false",
    ]
    deleted = subprocess.run(command, capture_output=True, text=True, timeout=120)
    if not report.check(deleted.returncode == 0, f"pod {args.pod_a} deleted" + (deleted.stderr.strip()[:200] and
                        f": {deleted.stderr.strip()[:200]}")):  # fmt: skip
        return
    end, told = time.monotonic() + args.takeover_wait, 0
    answer = on_b.run_python("'x' in globals()", session)
    while error_type(answer) == UNREACHABLE and time.monotonic() < end:
        told += 1  # the owner's Lease is still live: B waits for it to lapse (or to be released)
        answer = on_b.run_python("'x' in globals()", session)
    outcome, text = after_owner_deleted(answer, args.pod_a)
    waited = f"after {told} 'did not answer' repl{'y' if told == 1 else 'ies'}"
    if outcome == "takeover":
        report.check(True, f"pod {args.pod_b} took session {session} over {waited}, with the notice: {text!r}")
    elif outcome == "handed-over":
        report.check(True, f"pod {args.pod_b} took session {session} over {waited}: {args.pod_a} handed it over as it "
                     f"stopped, and the answer says so: {text!r}")  # fmt: skip
    elif outcome == "released":
        report.check(True, f"pod {args.pod_b} holds session {session} now, fresh ({waited}): {args.pod_a} gave its "
                     "Leases up as it stopped, so no takeover was due")  # fmt: skip
        report.skip(
            "the takeover notice: not seen, since the deleted pod stopped gracefully (it releases "
            "its sessions); one that dies without stopping (node lost, OOM kill) is taken over with it"
        )
    else:
        report.check(False, f"after pod {args.pod_a} was deleted, session {session} through {args.pod_b} "
                     f"answered ({outcome}, {waited}): {text[:300]!r}")  # fmt: skip
    leftover: list[str] = []

    def a_is_cleaned_up() -> bool:
        leftover[:] = owned_by(kubectl(args.namespace, "get", "sandboxclaims", "-l", MANAGED_BY), args.pod_a)
        leftover.extend(liveness_lease(kubectl(args.namespace, "get", "leases"), args.pod_a))
        return not leftover

    clean = wait_until(a_is_cleaned_up, args.wait)
    report.check(clean, f"no claim of {args.pod_a} and no liveness Lease of it left" if clean
                 else f"left of {args.pod_a} after {args.wait:g} s: {', '.join(leftover)}")  # fmt: skip
    # A named session has no end in MCP (it lives until the face's idle timeout): its guest exits instead, and the
    # face deletes the sandbox it ran in.
    pod = text_of(on_b.run_python("import socket\nsocket.gethostname()", session)).strip().strip("'\"")
    claim = claim_serving(args.namespace, pod)
    on_b.run_python("import os\nos._exit(0)", session)
    on_b.close()
    ended = claim is not None and wait_until(lambda: claim not in live_claims(args.namespace), args.wait, 0.5)
    report.check(ended, f"session {session} ended (its guest exited): its claim {claim} is gone")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description="smoke.sh's MCP client (see deploy/kubernetes/smoke.sh)")
    commands = parser.add_subparsers(dest="command", required=True)
    commands.add_parser("facts")
    commands.add_parser("pods")
    for name in ("product", "replicas"):
        command = commands.add_parser(name)
        command.add_argument("-n", "--namespace", default="mcp-codemode")
        command.add_argument("--token-secret", default="", help="NAME/KEY of the Secret holding the face's tokens")
        command.add_argument("--timeout", type=float, default=180.0, help="seconds one HTTP exchange may take")
        command.add_argument("--wait", type=float, default=120.0, help="seconds to wait for the cluster to tidy up")
        if name == "product":
            command.add_argument("url")
        else:
            command.add_argument("--takeover-wait", type=float, default=300.0)
            command.add_argument("url_a")
            command.add_argument("pod_a")
            command.add_argument("url_b")
            command.add_argument("pod_b")
    args = parser.parse_args(argv)
    if args.command in ("facts", "pods"):
        found = json.load(sys.stdin)
        print(" ".join(deployment_facts(found) if args.command == "facts" else ready_pods(found)))
        return 0
    report = Report()
    try:
        (product if args.command == "product" else replicas)(args, report)
    except (McpError, OSError, ValueError, KeyError, subprocess.SubprocessError) as exc:
        report.check(False, f"{args.command}: {type(exc).__name__}: {exc}")
    return 1 if report.failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
