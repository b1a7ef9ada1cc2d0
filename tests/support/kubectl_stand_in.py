"""A STAND-IN for kubectl, for tests/deploy/test_smoke_script.py: it answers the calls deploy/kubernetes/smoke.sh and
smoke_client.py make, as a cluster running the manifests would, so that the script's whole flow runs here.

No Kubernetes runs on these machines, so each answer comes from the nearest real thing:

* the face's claims, Sandboxes and Leases: the emulated API server the face replicas use (kube_emulator.py), read with
  an operator's token; ``auth can-i --as`` the face's account: that server's access review, which answers from the
  RENDERED Role (and "no" for any other account, since nothing else is bound);
* ``port-forward``: a TCP relay to a REAL face replica (``mcp-codemode serve`` on 127.0.0.1), for ``svc/NAME`` the
  first pod not deleted, for ``pod/NAME`` that one; ``delete pod``: a signal to that replica's process (SIGKILL by
  default: a pod that dies without stopping, as on a lost node), and the pod is gone from ``get pods``;
* ``get deployment``: the rendered Deployment the test put in the state, with the ready replicas it says;
* smoke.sh's own claim: a file in the state folder; ``exec`` of the guest's boot runs the REAL guest, unsandboxed but
  in an empty network namespace of its own (``unshare --net``), so the no-network check has something real to find;
  ``dmesg`` and ``/proc/version`` answer as gVisor or as runc, as the state says.

Run as ``python kubectl_stand_in.py ARGS`` with FAKE_STATE naming the folder whose state.json says all this; every
call is appended to calls.log there. Standard library only.
"""

from __future__ import annotations

import base64
import json
import os
import signal
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # imported where used: each kubectl call is a process start, and smoke.sh makes dozens
    import asyncio

RESOURCES = {  # kubectl's name (with or without its group) -> (group, version, plural) on the emulated API
    "sandboxclaims": ("extensions.agents.x-k8s.io", "v1beta1", "sandboxclaims"),
    "sandboxes": ("agents.x-k8s.io", "v1beta1", "sandboxes"),
    "leases": ("coordination.k8s.io", "v1", "leases"),
}
GVISOR_DMESG = "[    0.000000] Starting gVisor..."
RUNC_VERSION = "Linux version 6.1.0-28-amd64 (debian-kernel@lists.debian.org) #1 SMP PREEMPT_DYNAMIC Debian"
SMOKE_CLAIM = "mcp-codemode-smoke-"

state_dir = Path(os.environ["FAKE_STATE"])
state: dict[str, Any] = json.loads((state_dir / "state.json").read_text())


def save() -> None:
    (state_dir / "state.json").write_text(json.dumps(state))


def option(args: list[str], name: str) -> str:
    """The value of ``--name=value`` or ``--name value`` (or ``-n value``), removed from ``args``; "" if absent."""
    for at, arg in enumerate(args):
        if arg.startswith(name + "="):
            del args[at]
            return arg.split("=", 1)[1]
        if arg == name and at + 1 < len(args):
            value = args[at + 1]
            del args[at : at + 2]
            return value
    return ""


def api(method: str, path: str, token: str, body: dict[str, Any] | None = None) -> tuple[int, dict[str, Any]]:
    import urllib.error
    import urllib.request

    data = json.dumps(body).encode() if body is not None else None
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"}
    request = urllib.request.Request(state["api"] + path, data=data, method=method, headers=headers)
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return answer.status, json.loads(answer.read() or b"{}")
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def can_i(args: list[str]) -> int:
    """``auth can-i VERB RESOURCE[.GROUP][/NAME] [--subresource=S] --as=ACCOUNT``, answered by the emulated API's
    review."""
    subresource, account = option(args, "--subresource"), option(args, "--as")
    verb, what = args[2], args[3]
    what, _, name = what.partition("/")
    resource, _, group = what.partition(".")
    allowed = False
    if account == state["account"]:
        attributes = {"namespace": state["namespace"], "verb": verb, "group": group, "resource": resource,
                      "subresource": subresource}  # fmt: skip
        if name:
            attributes["name"] = name
        review = {"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectAccessReview",
                  "spec": {"resourceAttributes": attributes}}  # fmt: skip
        status, answer = api("POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", state["face_token"],
                             review)  # fmt: skip
        allowed = status == 201 and bool(answer["status"]["allowed"])
    print("yes" if allowed else "no")
    return 0 if allowed else 1


def listed(kind: str, selector: str) -> int:
    group, version, plural = RESOURCES[kind.split(".")[0]]
    query = f"?labelSelector={selector}" if selector else ""
    path = f"/apis/{group}/{version}/namespaces/{state['namespace']}/{plural}{query}"
    status, answer = api("GET", path, state["admin_token"])
    if status != 200:
        print(f"Error from server: {answer.get('message', status)}", file=sys.stderr)
        return 1
    print(json.dumps({"apiVersion": "v1", "kind": "List", "items": answer.get("items") or []}))
    return 0


def pods() -> dict[str, Any]:
    items = [{"metadata": {"name": name}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
             for name in sorted(state["pods"]) if name not in state["deleted"]]  # fmt: skip
    return {"apiVersion": "v1", "kind": "List", "items": items}


async def relay(target: str, remote: str) -> None:
    """``port-forward TARGET :REMOTE``: a local port relayed to the replica behind TARGET, until killed."""
    import asyncio

    kind, _, name = target.partition("/")
    live = [pod for pod in sorted(state["pods"]) if pod not in state["deleted"]]
    port = state["pods"][name if kind == "pod" else live[0]]["port"]

    async def pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while data := await reader.read(65536):
                writer.write(data)
                await writer.drain()
        except OSError:
            pass
        writer.close()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            upstream_reader, upstream_writer = await asyncio.open_connection("127.0.0.1", port)
        except OSError:
            writer.close()
            return
        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    print(f"Forwarding from 127.0.0.1:{server.sockets[0].getsockname()[1]} -> {remote}", flush=True)
    async with server:
        await server.serve_forever()


def smoke_claim(args: list[str]) -> int:
    """smoke.sh's own claim and the sandbox and pod it binds to (``sandbox-1``, ``pod-1``), as files."""
    claims = sorted(p.name for p in state_dir.glob("claim-*"))
    if args[:1] == ["create"]:
        name = next(line.split()[1] for line in sys.stdin if line.strip().startswith("name:"))
        (state_dir / f"claim-{name}").touch()
    elif args[:1] == ["delete"]:
        for claim in claims:
            (state_dir / claim).unlink()
    elif "-o" in args and args[args.index("-o") + 1] == "name":
        print("\n".join(f"sandboxclaim.extensions.agents.x-k8s.io/{c[6:]}" for c in claims))
    elif args[:2] == ["get", "sandboxclaim"]:
        print("sandbox-1", end="")
    elif not claims:
        return 1
    elif "-o" in args:
        print("pod-1", end="")
    return 0


def exec_in_pod(args: list[str]) -> int:
    command = args[args.index("--") + 1 :]
    if command[-2:-1] == [state["guest_boot_in_pod"]]:
        guest = [command[0], *command[1:-2], state["guest_boot"], command[-1]]
        os.execvp("unshare", ["unshare", "--net", *guest])
    gvisor = state["kernel"] == "gvisor"
    if command == ["dmesg"]:
        print(GVISOR_DMESG if gvisor else "[    0.000000] Linux version 6.1.0-28-amd64")
    else:
        print("Linux version 4.4.0 #1 SMP Sun Jan 10 15:06:54 PST 2016" if gvisor else RUNC_VERSION)
    return 0


def main(args: list[str]) -> int:
    with (state_dir / "calls.log").open("a") as log:
        log.write(json.dumps(args) + "\n")
    namespace = option(args, "-n") or option(args, "--namespace")
    output = option(args, "-o")
    selector = option(args, "-l")
    if args[:2] == ["auth", "can-i"]:
        return can_i(args)
    if args[:1] == ["port-forward"]:
        import asyncio

        option(args, "--address")
        asyncio.run(relay(args[1], args[2].lstrip(":")))
        return 0
    if args[:1] == ["exec"]:
        return exec_in_pod(args)
    if args[:1] == ["create"] or args[:1] == ["wait"] or SMOKE_CLAIM in " ".join(args) or "smoke" in selector:
        return smoke_claim([*args, "-o", output] if output else args)
    if args[:2] in (["get", "sandbox"], ["get", "pod"]):
        return smoke_claim([*args, "-o", output] if output else args)
    if args[:2] == ["get", "sandboxwarmpool"] or args[:3] == ["get", "runtimeclass", "gvisor"]:
        return 0
    if args[:2] == ["get", "service"]:
        print("192.0.2.1" if namespace == "default" else "8765", end="")
        return 0
    if args[:2] == ["get", "deployment"]:
        print(json.dumps({**state["deployment"], "status": {"readyReplicas": state["ready"]}}))
        return 0
    if args[:2] == ["get", "secret"]:
        print(json.dumps({"data": {"tokens": base64.b64encode(state["tokens"].encode()).decode()}}))
        return 0
    if args[:2] == ["get", "pods"]:
        print(json.dumps(pods()))
        return 0
    if args[:2] == ["delete", "pod"]:
        os.kill(state["pods"][args[2]]["pid"], getattr(signal, "SIG" + state.get("delete_signal", "KILL")))
        state["deleted"].append(args[2])
        save()
        return 0
    if args[:1] == ["get"] and output == "json" and args[1].split(".")[0] in RESOURCES:
        return listed(args[1], selector)
    print(f"kubectl stand-in: unexpected {sys.argv[1:]}", file=sys.stderr)
    return 3


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
