#!/usr/bin/env bash
# The seed's story over A2A with the official JavaScript SDK as the client,
# each run against a fresh `vigil serve` on a free loopback port and a
# scratch SQLite file:
#   - @a2a-js/sdk 0.3.14, the newest of its 0.3 line (story.mjs, A2A 0.3);
#   - @a2a-js/sdk 1.3.0 as it comes (story10.mjs plain, A2A 1.0);
#   - @a2a-js/sdk 1.3.0 with its 0.3 compatibility layer switched on
#     (story10.mjs compat: it must still choose 1.0, and the layer's own
#     0.3 transport then plays the story's first steps over 0.3).
# Each SDK is pinned and kept in a cache folder of its own, so a later run
# skips the install. Any mismatch fails.
#
# The A2A 1.0 test kit (a2aproject/a2a-tck) is a Python project taken
# from its repository; neither the npm registry nor the Go module proxy
# serves it, so it is not run here.
set -euo pipefail
cd "$(dirname "$0")/.."

cache="${XDG_CACHE_HOME:-$HOME/.cache}/vigil-ci"
sdk() { # version -> the folder it is installed in
  local dir="$cache/a2a-js-sdk-$1"
  if [ ! -f "$dir/node_modules/@a2a-js/sdk/package.json" ]; then
    mkdir -p "$dir"
    npm install --prefix "$dir" --no-audit --no-fund --loglevel=error "@a2a-js/sdk@$1" >&2
  fi
  echo "$dir"
}
sdk03=$(sdk 0.3.14)
sdk10=$(sdk 1.3.0)

work=$(mktemp -d)
pid=""
stop_serve() {
  if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  pid=""
}
cleanup() {
  stop_serve
  rm -rf "$work"
}
trap cleanup EXIT

go build -o "$work/vigil" ./cmd/vigil
coord=a2a-ci-agent-main-token-1
person=a2a-ci-operator-token-002
ops=a2a-ci-agent-ops-token-003
admin=a2a-ci-admin-token-000004
cat >"$work/config.json" <<JSON
{"tokens": [
  {"token": "$coord", "role": "agent", "agent": "main"},
  {"token": "$ops", "role": "agent", "agent": "ops"},
  {"token": "$person", "role": "operator", "id": "alice"},
  {"token": "$admin", "role": "admin", "id": "ci"}
]}
JSON

# serve starts vigil serve on a fresh database and sets base.
serve() {
  local db="$work/$1.db"
  local port
  port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()')
  base="http://127.0.0.1:$port"
  "$work/vigil" serve --addr "127.0.0.1:$port" --db "$db" --config "$work/config.json" >"$work/serve-$1.log" 2>&1 &
  pid=$!
  for _ in $(seq 1 100); do
    curl -fsS "$base/healthz" >/dev/null 2>&1 && return 0
    kill -0 "$pid" 2>/dev/null || { cat "$work/serve-$1.log"; exit 1; }
    sleep 0.1
  done
  echo "vigil serve did not answer"; cat "$work/serve-$1.log"; exit 1
}

# play runs a story script with an SDK's modules: node resolves them from
# the story's folder, so the cache is linked there for this run only.
play() { # name sdk-dir script args...
  local name=$1 dir=$2 script=$3
  shift 3
  mkdir -p "$work/$name"
  cp "scripts/a2a-interop/$script" "$work/$name/"
  ln -s "$dir/node_modules" "$work/$name/node_modules"
  serve "$name"
  echo "-- $name"
  if ! OPS_TOKEN="$ops" ADMIN_TOKEN="$admin" node "$work/$name/$script" "$base" "$coord" "$person" "$@"; then
    echo "-- vigil serve's log"; cat "$work/serve-$name.log"
    exit 1
  fi
  stop_serve
}

play sdk-0.3.14 "$sdk03" story.mjs
play sdk-1.3.0 "$sdk10" story10.mjs plain
play sdk-1.3.0-compat "$sdk10" story10.mjs compat
