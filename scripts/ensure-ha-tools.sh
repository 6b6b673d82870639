#!/usr/bin/env bash
# The Debian packages `npm run start:ha` runs (scripts/start-ha.ts), installed when missing:
#   redis-server (its binary is also the Sentinel: `redis-server --sentinel`), haproxy, patroni,
#   etcd-server (Patroni's store), python3-psycopg2 (Patroni's driver) and PostgreSQL 15's server.
# Installing needs root and apt-get; elsewhere it says what to run.
set -euo pipefail

log() { echo "ensure-ha-tools: $*"; }
missing=()
command -v redis-server >/dev/null 2>&1 || missing+=(redis-server)
command -v haproxy >/dev/null 2>&1 || [ -x /usr/sbin/haproxy ] || missing+=(haproxy)
command -v patroni >/dev/null 2>&1 || missing+=(patroni python3-psycopg2)
command -v etcd >/dev/null 2>&1 || missing+=(etcd-server)
[ -x "${PG_BIN_DIR:-/usr/lib/postgresql/15/bin}/postgres" ] || missing+=(postgresql-15)
if [ ${#missing[@]} = 0 ]; then
  log "redis-server, haproxy, patroni, etcd, postgresql-15 ok"
  exit 0
fi
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null 2>&1; then
  echo "ensure-ha-tools: ERROR: missing ${missing[*]}: run  sudo apt-get update && sudo apt-get install -y ${missing[*]}" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
log "apt-get install -y ${missing[*]}"
if ! apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; then
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
# Debian starts the packages' own services where an init system runs; start:ha runs its own copies.
log "installed ${missing[*]}"
