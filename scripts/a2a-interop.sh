#!/usr/bin/env bash
# The seed's story over A2A with the official JavaScript SDK as the client
# (scripts/a2a-interop/story.mjs), against a real `vigil serve` on a free
# loopback port and a scratch SQLite file. The SDK is pinned to the newest
# release of its 0.3 line, the protocol revision vigil serves, and kept in
# a cache folder so a later run skips the install. Any mismatch fails.
set -euo pipefail
cd "$(dirname "$0")/.."

sdk_version=0.3.14
sdk_dir="${XDG_CACHE_HOME:-$HOME/.cache}/vigil-ci/a2a-js-sdk-$sdk_version"
if [ ! -f "$sdk_dir/node_modules/@a2a-js/sdk/package.json" ]; then
  mkdir -p "$sdk_dir"
  npm install --prefix "$sdk_dir" --no-audit --no-fund --loglevel=error "@a2a-js/sdk@$sdk_version"
fi

work=$(mktemp -d)
pid=""
cleanup() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/vigil" ./cmd/vigil
coord=a2a-ci-agent-main-token-1
person=a2a-ci-operator-token-002
ops=a2a-ci-agent-ops-token-003
cat >"$work/config.json" <<JSON
{"tokens": [
  {"token": "$coord", "role": "agent", "agent": "main"},
  {"token": "$ops", "role": "agent", "agent": "ops"},
  {"token": "$person", "role": "operator", "id": "alice"}
]}
JSON
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
base="http://127.0.0.1:$port"
"$work/vigil" serve --addr "127.0.0.1:$port" --db "$work/vigil.db" --config "$work/config.json" >"$work/serve.log" 2>&1 &
pid=$!
for _ in $(seq 1 100); do
  curl -fsS "$base/healthz" >/dev/null 2>&1 && break
  kill -0 "$pid" 2>/dev/null || { cat "$work/serve.log"; exit 1; }
  sleep 0.1
done

# Node resolves the SDK from the story's folder, so link the cache there
# for this run only.
mkdir -p "$work/story"
cp scripts/a2a-interop/story.mjs "$work/story/"
ln -s "$sdk_dir/node_modules" "$work/story/node_modules"
if ! OPS_TOKEN="$ops" node "$work/story/story.mjs" "$base" "$coord" "$person"; then
  echo "-- vigil serve's log"; cat "$work/serve.log"
  exit 1
fi
