#!/usr/bin/env bash
# Checks what an operator deployed, on a real cluster, with kubectl and python3 (standard library only). It checks
# the product as its clients meet it, not only the pieces:
#   1. the face's own rights: as its ServiceAccount (kubectl auth can-i --as), every verb the bridge uses is allowed
#      and a few it must never have are not;
#   2. the sandbox pieces, with a SandboxClaim of its own: the claim binds (how fast), the guest boots through
#      pods/exec and keeps state, the sandbox has no network, the pod runs under gVisor (or, with the no-gvisor
#      overlay chosen, says so), and deleting the claim leaves nothing;
#   3. through the face Service (a port-forward, the bearer token from the face's Secret): state across two
#      run_python calls, a file in and out, an image, and the session's end (DELETE) taking its claim with it;
#   4. with two ready replicas: a call through each pod, a call forwarded to the replica holding its session, then
#      that pod deleted: the other replica serves the session (with the takeover notice when the owner died without
#      giving it up) and none of the deleted pod's claims or its liveness Lease is left.
# Every exit path stops its port-forwards and deletes its own claim. Exit status 0 only when every check that ran
# passed; a check that could not run says "skip" and why, and is not counted as passed.
#
# Usage: deploy/kubernetes/smoke.sh [-n NAMESPACE] [-p WARM_POOL] [-d DEPLOYMENT] [-s SERVICE] [-t READY_TIMEOUT]
#   (defaults: mcp-codemode, mcp-codemode-sandbox, mcp-codemode, mcp-codemode, 120 seconds)
#   KUBECTL=/path/to/kubectl picks another kubectl; MCP_CODEMODE_SMOKE_TOKEN=... gives a bearer token instead of
#   reading the face's Secret (which needs `get secrets` in the namespace).
set -euo pipefail

namespace="mcp-codemode"
pool="mcp-codemode-sandbox"
deployment="mcp-codemode"
service="mcp-codemode"
ready_timeout=120
while getopts "n:p:d:s:t:h" option; do
    case "$option" in
        n) namespace="$OPTARG" ;;
        p) pool="$OPTARG" ;;
        d) deployment="$OPTARG" ;;
        s) service="$OPTARG" ;;
        t) ready_timeout="$OPTARG" ;;
        *) sed -n '2,20p' "$0"; exit 2 ;;
    esac
done
export KUBECTL="${KUBECTL:-kubectl}"
kubectl="$KUBECTL"
here="$(cd "$(dirname "$0")" && pwd)"
client="$here/smoke_client.py"
guest_boot="/opt/mcp-codemode/boot.py"
claim="mcp-codemode-smoke-$(date +%s)-$RANDOM"
work="$(mktemp -d)"
report="$work/report"
: >"$report"
forwards=()

# The verbs the face uses, as "verb resource[.group][/name] [subresource]": the rows of
# src/mcp_codemode/cluster/permissions.py (tests/deploy/test_smoke_script.py fails when the two differ).
face_may=(
    "create sandboxclaims.extensions.agents.x-k8s.io"
    "get sandboxclaims.extensions.agents.x-k8s.io"
    "watch sandboxclaims.extensions.agents.x-k8s.io"
    "patch sandboxclaims.extensions.agents.x-k8s.io"
    "delete sandboxclaims.extensions.agents.x-k8s.io"
    "list sandboxclaims.extensions.agents.x-k8s.io"
    "get sandboxwarmpools.extensions.agents.x-k8s.io"
    "get sandboxes.agents.x-k8s.io"
    "get pods exec"
    "create pods exec"
    "get leases.coordination.k8s.io"
    "create leases.coordination.k8s.io"
    "patch leases.coordination.k8s.io"
    "delete leases.coordination.k8s.io"
    "get secrets/mcp-codemode-oauth"
    "patch secrets/mcp-codemode-oauth"
    "create configmaps"
    "list configmaps"
    "patch configmaps"
    "delete configmaps"
)
# What the face must never be able to do: read the namespace's other secrets (the face's own tokens are among them:
# it may read only its sign-ins, by name, so an unnamed get or a list is refused), start
# or remove pods of its own, or change what a sandbox is.
face_may_not=(
    "get secrets"
    "list secrets"
    "create pods"
    "delete pods"
    "patch sandboxtemplates.extensions.agents.x-k8s.io"
)

k() { "$kubectl" -n "$namespace" "$@"; }
ok() { printf 'ok    %s\n' "$*" | tee -a "$report"; }
fail() { printf 'FAIL  %s\n' "$*" | tee -a "$report"; }
skip() { printf 'skip  %s\n' "$*" | tee -a "$report"; }
die() { fail "$*" >&2; exit 1; }
# python3 for clock and dates: GNU date's %N and -d are missing on macOS and BusyBox.
now_ms() { python3 -c 'import time; print(int(time.time() * 1000))'; }
# checked COMMAND...: its ok/FAIL/skip lines go to the report; a failure that printed no FAIL line (a crash) counts.
checked() {
    local status=0 before
    before="$(grep -c '^FAIL' "$report" || true)"
    "$@" | tee -a "$report" || status=$?
    if [ "$status" -ne 0 ] && [ "$(grep -c '^FAIL' "$report" || true)" = "$before" ]; then
        fail "$* stopped with status $status (its error is above)"
    fi
}

cleanup() {
    # Every exit path: no port-forward left running, no claim of ours (and so no pod) left behind.
    local pid
    for pid in "${forwards[@]+"${forwards[@]}"}"; do kill "$pid" 2>/dev/null || true; done
    k delete sandboxclaim "$claim" --ignore-not-found --wait=false >/dev/null 2>&1 || true
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

# forward TARGET PORT: a port-forward to TARGET (svc/NAME or pod/NAME) on a free local port, kept until the end;
# sets $forwarded to the URL of the face behind it.
forward() {
    local log="$work/forward-${#forwards[@]}.log" port="" tries=0
    : >"$log"  # before the background process opens it: the loop below reads it at once
    "$kubectl" -n "$namespace" port-forward "$1" ":$2" --address 127.0.0.1 >"$log" 2>&1 &
    forwards+=("$!")
    while [ -z "$port" ] && [ "$tries" -lt 150 ]; do
        port="$(sed -n 's/^Forwarding from 127\.0\.0\.1:\([0-9]*\) .*/\1/p' "$log")"
        port="${port%%$'\n'*}"
        tries=$((tries + 1))
        [ -n "$port" ] || sleep 0.2
    done
    [ -n "$port" ] || die "kubectl port-forward $1 did not start within 30 s: $(cat "$log")"
    forwarded="http://127.0.0.1:$port/mcp"
}

command -v "$kubectl" >/dev/null || die "$kubectl not found (set KUBECTL=/path/to/kubectl)"
command -v python3 >/dev/null || die "python3 not found: it speaks the guest's frames and MCP; install it"
k get sandboxwarmpool "$pool" >/dev/null \
    || die "no SandboxWarmPool $pool in namespace $namespace: apply agent-sandbox v0.5.6, then kubectl apply -k"
k get deployment "$deployment" -o json >"$work/deployment.json" \
    || die "no Deployment $deployment in namespace $namespace (the face; -d names another)"
read -r face_account runtime_class secret_name secret_key ready selector face_port \
    <<<"$(python3 "$client" facts <"$work/deployment.json")" || die "could not read deployment/$deployment's facts"

# 1. The face's rights, asked as its ServiceAccount (this needs the right to impersonate it, which admins have).
as="system:serviceaccount:$namespace:$face_account"
can_i() {  # VERB RESOURCE [SUBRESOURCE]: yes, no, or what kubectl said when it could not answer
    local answer
    answer="$("$kubectl" auth can-i "$1" "$2" ${3:+--subresource="$3"} --as="$as" -n "$namespace" \
        2>"$work/can-i.err")" || true  # a warning on stderr is not the answer
    [ -n "$answer" ] || answer="$(cat "$work/can-i.err")"
    printf '%s' "${answer%%$'\n'*}"
}
denied=()
for row in "${face_may[@]}"; do
    read -r verb resource subresource <<<"$row"
    [ "$(can_i "$verb" "$resource" "$subresource")" = yes ] || denied+=("$verb ${resource}${subresource:+/$subresource}")
done
if [ "${#denied[@]}" -eq 0 ]; then
    ok "as $as: all ${#face_may[@]} verbs the bridge uses are allowed"
else
    fail "as $as, denied: ${denied[*]} (deploy/kubernetes/base/face-rbac.yaml grants them)"
fi
allowed=()
for row in "${face_may_not[@]}"; do
    read -r verb resource subresource <<<"$row"
    answer="$(can_i "$verb" "$resource" "$subresource")"
    [ "$answer" = no ] || allowed+=("$verb $resource ($answer)")
done
if [ "${#allowed[@]}" -eq 0 ]; then
    ok "as $as: none of the ${#face_may_not[@]} rights it must not have is allowed ($(IFS=,; echo "${face_may_not[*]}"))"
else
    fail "as $as, allowed what the face must not do: ${allowed[*]}"
fi

if [ "$runtime_class" = none ]; then
    skip "RuntimeClass: the face accepts sandboxes without one (MCP_BRIDGE_KUBE_RUNTIME_CLASS=none, overlays/no-gvisor)"
elif "$kubectl" get runtimeclass "$runtime_class" >/dev/null 2>&1; then
    ok "RuntimeClass $runtime_class exists (the face requires it of every sandbox)"
else
    fail "no RuntimeClass $runtime_class: sandbox pods cannot start (deploy/kubernetes/README.md, step 2)"
fi

# 2. A claim of our own binds; how long it took (a warm pod: about a second; a cold start: the image pull and boot).
backstop="$(python3 -c 'import datetime as d; print((d.datetime.now(d.timezone.utc) + d.timedelta(minutes=15)).strftime("%Y-%m-%dT%H:%M:%SZ"))')"
started="$(now_ms)"
k create -f - >/dev/null <<EOF
apiVersion: extensions.agents.x-k8s.io/v1beta1
kind: SandboxClaim
metadata:
  name: $claim
  labels:
    app.kubernetes.io/managed-by: mcp-codemode-smoke
spec:
  warmPoolRef:
    name: $pool
  lifecycle:
    shutdownTime: "$backstop"
    shutdownPolicy: Delete
EOF
if k wait --for=condition=Ready "sandboxclaim/$claim" --timeout="${ready_timeout}s" >/dev/null; then
    ok "claim $claim ready in $(($(now_ms) - started)) ms"
else
    k describe sandboxclaim "$claim" >&2 || true
    die "claim $claim not Ready within ${ready_timeout}s"
fi

sandbox="$(k get sandboxclaim "$claim" -o jsonpath='{.status.sandbox.name}' || true)"
[ -n "$sandbox" ] || die "claim $claim is Ready but names no sandbox in .status.sandbox.name"
# A pod adopted from the warm pool keeps its own name, recorded on the sandbox; a cold one is named after it.
pod="$(k get sandbox "$sandbox" -o jsonpath='{.metadata.annotations.agents\.x-k8s\.io/pod-name}' || true)"
pod="${pod:-$sandbox}"
k get pod "$pod" >/dev/null || die "pod $pod of sandbox $sandbox not found"
ok "claim bound to sandbox $sandbox, pod $pod"

# gVisor: its dmesg starts with "Starting gVisor..."; its /proc/version is a fixed, made-up 4.4.0 kernel.
kernel_log="$(k exec "$pod" -- dmesg 2>/dev/null || true)"
proc_version="$(k exec "$pod" -- cat /proc/version 2>/dev/null || true)"
if grep -q "gVisor" <<<"$kernel_log"; then
    ok "gVisor present: $(grep -m1 "gVisor" <<<"$kernel_log")"
elif grep -q "4.4.0 #1 SMP Sun Jan 10 15:06:54 PST 2016" <<<"$proc_version"; then
    ok "gVisor present: /proc/version is gVisor's ($proc_version)"
elif [ "$runtime_class" = none ]; then
    ok "runc (no-gvisor overlay, chosen): the guest's system calls reach the node's kernel ($proc_version)"
elif [ "$runtime_class" != gvisor ]; then
    skip "the sandbox runtime: RuntimeClass $runtime_class, which this script cannot recognise from inside ($proc_version)"
else
    fail "no sign of gVisor: dmesg '${kernel_log:0:80}', /proc/version '$proc_version'"
fi

# The guest, as the face starts it: its boot through pods/exec, frames on stdin and stdout.
api_ip="$("$kubectl" -n default get service kubernetes -o jsonpath='{.spec.clusterIP}' 2>/dev/null || true)"
config='{"workdir":"/workspace"}'
checked python3 - "$api_ip" "$kubectl" exec -i -n "$namespace" "$pod" -- python3 -I -B -u "$guest_boot" "$config" <<'PY'
"""Speak the guest's protocol over the exec stream: 4-byte big-endian length, then a JSON object."""
import json
import struct
import subprocess
import sys
import time

api_ip, command = sys.argv[1], sys.argv[2:]
guest = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
failures = 0


def report(passed, text):
    global failures
    failures += not passed
    print(("ok    " if passed else "FAIL  ") + text, flush=True)


def send(frame):
    payload = json.dumps(frame).encode()
    guest.stdin.write(struct.pack(">I", len(payload)) + payload)
    guest.stdin.flush()


def receive():
    header = guest.stdout.read(4)
    if len(header) < 4:
        report(False, "the guest's stream ended (exit status %s)" % guest.poll())
        sys.exit(1)
    (size,) = struct.unpack(">I", header)
    return json.loads(guest.stdout.read(size))


def run(cell_id, code):
    """The result frame of one cell; output frames before it are skipped, a call frame is not expected."""
    started = time.perf_counter()
    send({"type": "execute", "id": cell_id, "code": code})
    while True:
        frame = receive()
        if frame.get("type") == "result" and frame.get("id") == cell_id:
            frame["round_trip_ms"] = round((time.perf_counter() - started) * 1000, 1)
            return frame


started = time.perf_counter()
ready = receive()
report(ready.get("type") == "ready", "guest booted over pods/exec in %.0f ms: %s"
       % ((time.perf_counter() - started) * 1000, json.dumps(ready)))
first = run(1, "x = 41")
second = run(2, "x + 1")
report(second.get("status") == "ok" and second.get("value") == "42",
       "state across two cells of one session: x + 1 gave %r (%s ms)" % (second.get("value"), second["round_trip_ms"]))
probe = """
import socket
def reach(host, port):
    try:
        socket.create_connection((host, port), timeout=3).close()
        return "connected"
    except OSError as e:
        return type(e).__name__
{target: reach(target, 443) for target in %r if target}
""" % (["1.1.1.1", api_ip],)
network = run(3, probe)
reached = [target for target in ("1.1.1.1", api_ip) if target and "'%s': 'connected'" % target in str(network.get("value"))]
report(network.get("status") == "ok" and not reached,
       "no network from the sandbox: %s" % network.get("value", network.get("error")))
send({"type": "shutdown"})
guest.stdin.close()
report(guest.wait(timeout=30) == 0, "guest shut down cleanly")
sys.exit(1 if failures else 0)
PY

# Deleting the claim removes its sandbox and pod; nothing is left.
k delete sandboxclaim "$claim" --wait=true --timeout=120s >/dev/null || fail "claim $claim not deleted in 120 s"
deadline=$(($(date +%s) + 120))
while k get sandbox "$sandbox" >/dev/null 2>&1 || k get pod "$pod" >/dev/null 2>&1; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
        fail "sandbox $sandbox or pod $pod still present 120 s after its claim was deleted"
        break
    fi
    sleep 2
done
left="$(k get sandboxclaims -l app.kubernetes.io/managed-by=mcp-codemode-smoke -o name 2>&1 || true)"
if [ -z "$left" ]; then ok "no claim, sandbox or pod left after deleting the claim"; else fail "left behind: $left"; fi

# 3. The product, through the face Service, as a client meets it.
token_secret="$secret_name/$secret_key"
if [ -z "${MCP_CODEMODE_SMOKE_TOKEN:-}" ] && [ "$secret_name" = - ]; then
    skip "the face Service: the face's Deployment takes MCP_BRIDGE_HTTP_TOKEN from no Secret; set MCP_CODEMODE_SMOKE_TOKEN"
else
    service_port="$(k get service "$service" -o jsonpath='{.spec.ports[0].port}')" \
        || die "no Service $service in namespace $namespace (the face's; -s names another)"
    forward "svc/$service" "$service_port"
    checked python3 "$client" product -n "$namespace" --token-secret "$token_secret" "$forwarded"
fi

# 4. Two replicas: each pod answers, forwarding works, and a deleted owner's sessions and sandboxes move on.
if [ "$ready" -lt 2 ]; then
    skip "two replicas: needs 2 ready replicas of deployment/$deployment, it has $ready" \
        "(kubectl -n $namespace scale deployment/$deployment --replicas=2, then run this again)"
else
    k get pods -l "$selector" -o json >"$work/pods.json" || die "could not list the face pods ($selector)"
    read -r pod_a pod_b _ <<<"$(python3 "$client" pods <"$work/pods.json")" || true
    if [ -z "${pod_b:-}" ]; then
        skip "two replicas: fewer than 2 face pods are Ready (selector $selector)"
    else
        forward "pod/$pod_a" "$face_port"
        url_a="$forwarded"
        forward "pod/$pod_b" "$face_port"
        checked python3 "$client" replicas -n "$namespace" --token-secret "$token_secret" "$url_a" "$pod_a" "$forwarded" "$pod_b"
    fi
fi

passed="$(grep -c '^ok ' "$report" || true)"
failed="$(grep -c '^FAIL' "$report" || true)"
skipped="$(grep -c '^skip' "$report" || true)"
if [ "$failed" -eq 0 ]; then
    echo "smoke: all $passed checks that ran passed ($skipped skipped, not counted)"
else
    echo "smoke: $failed check(s) failed, $passed passed, $skipped skipped"
fi
[ "$failed" -eq 0 ]
