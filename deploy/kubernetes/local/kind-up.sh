#!/usr/bin/env bash
# A local cluster with gVisor, end to end: kind with runsc in its node (kind-gvisor.yaml), the two images built here
# and loaded into it, agent-sandbox v0.5.6, this folder's overlay, then smoke.sh. The steps of docs/kubernetes.md,
# "A local cluster with gVisor (kind)", in order. NOT run by this project's tests (no Docker engine or registry where
# they run): tests/deploy checks its files and that shellcheck passes; a real run is yours.
#
# Needs on this host: docker (ENGINE=podman with KIND_EXPERIMENTAL_PROVIDER=podman for podman), kind (v0.24 or newer:
# its kindnet enforces NetworkPolicy), kubectl, uv, openssl, python3, and gVisor's runsc and containerd-shim-runsc-v1
# in /usr/local/bin (https://gvisor.dev/docs/user_guide/install/).
#
# Usage: deploy/kubernetes/local/kind-up.sh [CLUSTER]   (default mcp-codemode; kind delete cluster --name CLUSTER
#        removes it all)
set -euo pipefail

cluster="${1:-mcp-codemode}"
engine="${ENGINE:-docker}"
here="$(cd "$(dirname "$0")" && pwd)"
root="$(cd "$here/../../.." && pwd)"
namespace="mcp-codemode"
agent_sandbox="https://github.com/kubernetes-sigs/agent-sandbox/releases/download/v0.5.6/sandbox-with-extensions.yaml"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

step() { printf '\n== %s\n' "$*"; }
for tool in "$engine" kind kubectl uv openssl python3; do
    command -v "$tool" >/dev/null || { echo "kind-up: $tool is not installed" >&2; exit 1; }
done
for binary in runsc containerd-shim-runsc-v1; do
    [ -x "/usr/local/bin/$binary" ] || {
        echo "kind-up: /usr/local/bin/$binary is missing: install gVisor (https://gvisor.dev/docs/user_guide/install/)" >&2
        exit 1
    }
done

step "1. the cluster: its node gets runsc and containerd's runsc handler; the RuntimeClass gvisor names it"
kind create cluster --name "$cluster" --config "$here/kind-gvisor.yaml"
kubectl config use-context "kind-$cluster"
kubectl apply -f "$here/runtimeclass.yaml"

step "2. the images, built from this checkout and loaded into the node (no registry)"
uv build --wheel --out-dir "$work/dist" "$root"
"$engine" build -f "$root/deploy/kubernetes/images/face.Containerfile" -t mcp-codemode:dev "$work/dist"
"$engine" build -f "$root/deploy/kubernetes/images/sandbox.Containerfile" -t mcp-codemode-sandbox:dev \
    "$root/src/mcp_codemode/guest"
kind load docker-image --name "$cluster" mcp-codemode:dev mcp-codemode-sandbox:dev

step "3. agent-sandbox v0.5.6: its controller, CRDs and extensions"
kubectl apply -f "$agent_sandbox"
kubectl -n agent-sandbox-system wait --for=condition=Available deployment --all --timeout=300s

step "4. the namespace, the face's bearer token and the replicas' shared secret, then this overlay"
token="$(openssl rand -hex 24)"
kubectl create namespace "$namespace" --dry-run=client -o yaml | kubectl apply -f -
kubectl -n "$namespace" create secret generic mcp-codemode-http \
    --from-literal=tokens="$token" --from-literal=peer-token="$(openssl rand -hex 32)"
kubectl apply -k "$here"
kubectl -n "$namespace" rollout status deployment/mcp-codemode --timeout=300s
kubectl -n "$namespace" wait --for=jsonpath='{.status.readyReplicas}'=2 \
    sandboxwarmpool/mcp-codemode-sandbox --timeout=300s

step "5. smoke.sh, with the token made above"
MCP_CODEMODE_SMOKE_TOKEN="$token" "$root/deploy/kubernetes/smoke.sh" -n "$namespace"
echo "kind-up: done. The face's bearer token: kubectl -n $namespace get secret mcp-codemode-http \\
    -o jsonpath='{.data.tokens}' | base64 -d; reach it with kubectl -n $namespace port-forward svc/mcp-codemode 8765"
