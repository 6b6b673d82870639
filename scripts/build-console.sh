#!/usr/bin/env bash
# Builds the browser consoles (console/ → console/dist, served under /console by the web process) when the
# build is missing or older than any source file. Run by scripts/setup.sh, so `npm start` and `npm test` serve a fresh build.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
stamp=console/dist/index.html
if [ -f "$stamp" ] && [ -z "$(find console/src console/index.html console/vite.config.ts package-lock.json -newer "$stamp" -print -quit)" ]; then
  exit 0
fi
node_modules/.bin/vite build --config console/vite.config.ts --logLevel warn
echo "build-console: console/dist built"
