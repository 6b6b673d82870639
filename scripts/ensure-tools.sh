#!/usr/bin/env bash
# Command-line tools the tests call, installed from Debian when missing (run by scripts/setup.sh when
# SETUP_SERVICES=1 or CI=true, i.e. by `npm test`):
#   promtool (Debian package `prometheus`): `promtool check metrics` on GET /metrics and
#   `promtool check rules` on ops/prometheus/alerts.yml (test/observability.test.ts);
#   haproxy: the balancer of the high-availability layout, run with its real configuration in front of
#   two stand-in web processes (test/haproxy-web-kill.test.ts).
# Installing needs root and apt-get; elsewhere it says what to run. The packages' own servers are not
# started here (no init system in CI; on a machine with one, Debian may start them: harmless, unused).
set -euo pipefail

log() { echo "ensure-tools: $*"; }

missing=()
command -v promtool >/dev/null 2>&1 || missing+=(prometheus)
command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ] || missing+=(haproxy)
if [ ${#missing[@]} = 0 ]; then
  log "promtool ok ($(command -v promtool)), haproxy ok"
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-tools: ERROR: missing ${missing[*]}: run  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
if ! apt-cache policy "${missing[@]}" 2>/dev/null | grep -q 'Candidate: [^(]'; then
  log "apt-get update"
  apt-get update -qq
fi
log "apt-get install -y ${missing[*]}"
if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
command -v promtool >/dev/null 2>&1 || { echo "ensure-tools: ERROR: the prometheus package installed no promtool" >&2; exit 1; }
command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ] || { echo "ensure-tools: ERROR: the haproxy package installed no haproxy" >&2; exit 1; }
log "installed ${missing[*]}"
