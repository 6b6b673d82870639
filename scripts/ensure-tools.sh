#!/usr/bin/env bash
# Command-line tools the tests call, installed from Debian when missing (run by scripts/setup.sh when
# SETUP_SERVICES=1 or CI=true, i.e. by `npm test`):
#   promtool (Debian package `prometheus`): `promtool check metrics` on GET /metrics and
#   `promtool check rules` on ops/prometheus/alerts.yml (test/observability.test.ts).
# Installing needs root and apt-get; elsewhere it says what to run. The package's own server is not
# started here (no init system in CI; on a machine with one, Debian may start it: harmless, unused).
set -euo pipefail

log() { echo "ensure-tools: $*"; }

if command -v promtool >/dev/null 2>&1; then
  log "promtool ok ($(command -v promtool))"
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-tools: ERROR: promtool is missing: run  sudo apt-get update && sudo apt-get install -y prometheus" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
if ! apt-cache policy prometheus 2>/dev/null | grep -q 'Candidate: [^(]'; then
  log "apt-get update"
  apt-get update -qq
fi
log "apt-get install -y prometheus (for promtool)"
if ! apt-get install -y -qq --no-install-recommends prometheus >/dev/null; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends prometheus >/dev/null
fi
command -v promtool >/dev/null 2>&1 || { echo "ensure-tools: ERROR: the prometheus package installed no promtool" >&2; exit 1; }
log "promtool installed ($(command -v promtool))"
