#!/usr/bin/env bash
# Idempotent setup, run by `npm test` and `npm start` before anything else (see docs/dependencies.md):
#   1. scripts/build-faiss.sh       faiss-node's native addon (exits at once when it already loads)
#   2. scripts/fetch-models.ts      the four ONNX face models, pinned by SHA-256, into var/models
#   3. scripts/build-console.sh     the browser consoles (console/dist), when missing or stale
#   4. scripts/ensure-services.sh   PostgreSQL and Redis, scripts/ensure-chromium.sh (Debian's chromium for the
#                                   browser tests) and scripts/ensure-tools.sh (promtool, Debian `prometheus`,
#                                   for the metrics/alert-rule tests), only when SETUP_SERVICES=1 or CI=true
# About 1 s when everything is already in place.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"

now_ms() { local t; t="$(date +%s%3N)"; case "$t" in *N*) echo $(( $(date +%s) * 1000 )) ;; *) echo "$t" ;; esac; }
started="$(now_ms)"

[ -d node_modules ] || { echo "setup: ERROR: node_modules is missing: run 'npm ci' first" >&2; exit 1; }

bash scripts/build-faiss.sh

# The local tsx binary avoids npx's start-up cost (and its npm config warnings); npx is the fallback.
if [ -x node_modules/.bin/tsx ]; then
  node_modules/.bin/tsx scripts/fetch-models.ts
else
  npx --yes tsx scripts/fetch-models.ts
fi

bash scripts/build-console.sh

if [ "${SETUP_SERVICES:-0}" = 1 ] || [ "${CI:-}" = true ]; then
  bash scripts/ensure-services.sh
  bash scripts/ensure-chromium.sh
  bash scripts/ensure-tools.sh
else
  echo "setup: PostgreSQL/Redis not checked (set SETUP_SERVICES=1 to check and start them)"
fi

echo "setup: ready in $(( $(now_ms) - started )) ms"
