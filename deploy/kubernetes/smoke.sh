#!/usr/bin/env bash
# Checks a real cluster running deploy/kubernetes, with kubectl alone (and python3 on this machine, to speak the
# guest's frames). What CI cannot check, because no control plane runs there:
#   1. a claim on the warm pool binds, and how long it took;
#   2. the guest boots through pods/exec and keeps its state across two cells of one session;
#   3. the sandbox has no network: connects to 1.1.1.1:443 and to the API server's service IP fail;
#   4. the pod runs under gVisor (its dmesg banner, else its fixed /proc/version);
#   5. deleting the claim leaves no claim, sandbox or pod behind.
# It makes one SandboxClaim of its own (labelled app.kubernetes.io/managed-by=mcp-codemode-smoke, so the face never
# takes it for a session) and deletes it on every exit path. Exit status 0 only when every check passed.
#
# Usage: deploy/kubernetes/smoke.sh [-n NAMESPACE] [-p WARM_POOL] [-t READY_TIMEOUT_SECONDS]
#        (defaults: mcp-codemode, mcp-codemode-sandbox, 120; KUBECTL=/path/to/kubectl to pick another kubectl)
set -euo pipefail

namespace="mcp-codemode"
pool="mcp-codemode-sandbox"
ready_timeout=120
while getopts "n:p:t:h" option; do
    case "$option" in
        n) namespace="$OPTARG" ;;
        p) pool="$OPTARG" ;;
        t) ready_timeout="$OPTARG" ;;
        *) sed -n '2,14p' "$0"; exit 2 ;;
    esac
done
kubectl="${KUBECTL:-kubectl}"
guest_boot="/opt/mcp-codemode/boot.py"
claim="mcp-codemode-smoke-$(date +%s)-$RANDOM"
failures=0

k() { "$kubectl" -n "$namespace" "$@"; }
ok() { printf 'ok    %s\n' "$*"; }
fail() { printf 'FAIL  %s\n' "$*"; failures=$((failures + 1)); }
die() { printf 'FAIL  %s\n' "$*" >&2; exit 1; }
# python3 for clock and dates: GNU date's %N and -d are missing on macOS and BusyBox.
now_ms() { python3 -c 'import time; print(int(time.time() * 1000))'; }

cleanup() {
    # Every exit path: a smoke run must not leave a claim (and so a pod) running.
    k delete sandboxclaim "$claim" --ignore-not-found --wait=false >/dev/null 2>&1 || true
}
trap cleanup EXIT

command -v "$kubectl" >/dev/null || die "$kubectl not found (set KUBECTL=/path/to/kubectl)"
command -v python3 >/dev/null || die "python3 not found: it speaks the guest's frames; install it"
k get sandboxwarmpool "$pool" >/dev/null \
    || die "no SandboxWarmPool $pool in namespace $namespace: apply agent-sandbox v0.5.6, then kubectl apply -k"
"$kubectl" get runtimeclass gvisor >/dev/null 2>&1 || fail "no RuntimeClass gvisor: sandbox pods cannot start"

# 1. A claim binds; how long it took (a warm pod: about a second; a cold start: the image pull and gVisor's boot).
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

sandbox="$(k get sandboxclaim "$claim" -o jsonpath='{.status.sandbox.name}')"
[ -n "$sandbox" ] || die "claim $claim is Ready but names no sandbox in .status.sandbox.name"
# A pod adopted from the warm pool keeps its own name, recorded on the sandbox; a cold one is named after it.
pod="$(k get sandbox "$sandbox" -o jsonpath='{.metadata.annotations.agents\.x-k8s\.io/pod-name}')"
pod="${pod:-$sandbox}"
k get pod "$pod" >/dev/null || die "pod $pod of sandbox $sandbox not found"
ok "claim bound to sandbox $sandbox, pod $pod"

# 4. gVisor: its dmesg starts with "Starting gVisor..."; its /proc/version is a fixed, made-up 4.4.0 kernel.
kernel_log="$(k exec "$pod" -- dmesg 2>/dev/null || true)"
proc_version="$(k exec "$pod" -- cat /proc/version 2>/dev/null || true)"
if grep -q "gVisor" <<<"$kernel_log"; then
    ok "gVisor present: $(grep -m1 "gVisor" <<<"$kernel_log")"
elif grep -q "4.4.0 #1 SMP Sun Jan 10 15:06:54 PST 2016" <<<"$proc_version"; then
    ok "gVisor present: /proc/version is gVisor's ($proc_version)"
else
    fail "no sign of gVisor: dmesg '${kernel_log:0:80}', /proc/version '$proc_version'"
fi

# 2 and 3. The guest, as the face starts it: its boot through pods/exec, frames on stdin and stdout.
api_ip="$("$kubectl" -n default get service kubernetes -o jsonpath='{.spec.clusterIP}' 2>/dev/null || true)"
config='{"workdir":"/workspace"}'
if python3 - "$api_ip" "$kubectl" exec -i -n "$namespace" "$pod" -- python3 -I -B -u "$guest_boot" "$config" <<'PY'
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
        raise SystemExit("FAIL  the guest's stream ended (exit status %s)" % guest.poll())
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
then :; else failures=$((failures + 1)); fi

# 5. Deleting the claim removes its sandbox and pod; nothing is left.
k delete sandboxclaim "$claim" --wait=true --timeout=120s >/dev/null || fail "claim $claim not deleted in 120 s"
deadline=$(($(date +%s) + 120))
while k get sandbox "$sandbox" >/dev/null 2>&1 || k get pod "$pod" >/dev/null 2>&1; do
    if [ "$(date +%s)" -ge "$deadline" ]; then
        fail "sandbox $sandbox or pod $pod still present 120 s after its claim was deleted"
        break
    fi
    sleep 2
done
left="$(k get sandboxclaims -l app.kubernetes.io/managed-by=mcp-codemode-smoke -o name)"
if [ -z "$left" ]; then ok "no claim, sandbox or pod left after deleting the claim"; else fail "left behind: $left"; fi

if [ "$failures" -eq 0 ]; then echo "smoke: all checks passed"; else echo "smoke: $failures check(s) failed"; fi
[ "$failures" -eq 0 ]
