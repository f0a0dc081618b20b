#!/usr/bin/env bash
# The TypeScript and Python clients' tests, then the framework adapters'
# (adapters/test.sh), each against a live vigil serve
# its tests start (VIGIL_BIN, or vigil built from this checkout). The
# TypeScript package's development tools (openapi-typescript, tsc, Node's
# types; pinned in its package.json) are installed into a cache folder
# keyed by that file, so a later run on the same machine skips the install.
set -euo pipefail
cd "$(dirname "$0")"

if [ -z "${VIGIL_BIN:-}" ]; then
  VIGIL_BIN="$(mktemp -d)/vigil"
  (cd .. && go build -o "$VIGIL_BIN" ./cmd/vigil)
fi
export VIGIL_BIN

key=$(sha256sum typescript/package.json | cut -c1-16)
deps="${XDG_CACHE_HOME:-$HOME/.cache}/vigil-ci/ts-client-$key"
if [ ! -x "$deps/node_modules/.bin/tsc" ]; then
  mkdir -p "$deps"
  cp typescript/package.json "$deps/"
  npm install --prefix "$deps" --no-audit --no-fund --loglevel=error
fi
ln -sfn "$deps/node_modules" typescript/node_modules

echo "-- TypeScript: types generated from docs/openapi.json, the client checked against them, its tests"
(cd typescript && npm test --silent)
# The framework adapters depend on the client as built into dist/.
(cd typescript && npm run build --silent)

echo "-- Python"
PYTHONPATH=python/src:python/tests python3 -m unittest discover -s python/tests

echo "-- framework adapters (adapters/test.sh)"
../adapters/test.sh
