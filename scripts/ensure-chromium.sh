#!/usr/bin/env bash
# Debian's Chromium for the console's browser tests (test/console-e2e.test.ts drives it with playwright-core;
# no browser download from anywhere but apt). Installed as root when missing; idempotent and quick when present.
set -euo pipefail
CHROMIUM="${CHROMIUM_PATH:-/usr/bin/chromium}"
if [ -x "$CHROMIUM" ]; then
  exit 0
fi
if [ "$(id -u)" != 0 ]; then
  echo "ensure-chromium: $CHROMIUM is missing; install it as root: apt-get install -y chromium" >&2
  exit 1
fi
echo "ensure-chromium: installing Debian's chromium (apt-get)"
export DEBIAN_FRONTEND=noninteractive
apt-get install -y --no-install-recommends chromium >/dev/null 2>&1 || { apt-get update >/dev/null && apt-get install -y --no-install-recommends chromium >/dev/null; }
[ -x "$CHROMIUM" ] || { echo "ensure-chromium: $CHROMIUM still missing after apt-get" >&2; exit 1; }
echo "ensure-chromium: $("$CHROMIUM" --version 2>/dev/null || echo chromium) installed"
