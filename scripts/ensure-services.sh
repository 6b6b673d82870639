#!/usr/bin/env bash
# Makes sure PostgreSQL and Redis answer, for tests and CI on a fresh machine (see docs/dependencies.md).
#
# - DATABASE_URL (default postgres://postgres@127.0.0.1:5432/faceid) and REDIS_URL (default
#   redis://127.0.0.1:6379) name the servers. When one points at another host, this script only checks it.
# - Local PostgreSQL not answering: start the Debian cluster (pg_ctlcluster); not installed at all:
#   apt-get install postgresql first. Then make sure the postgres role is reachable over 127.0.0.1 without
#   a password (tests connect as postgres@127.0.0.1:5432), adding trust lines to pg_hba.conf only if needed.
# - Local Redis not answering: start redis-server (no persistence), installing Debian's redis-server if the
#   binary is missing.
# Waits (bounded, SERVICES_WAIT_SECONDS, default 30) until each answers. Installing and starting need root.
set -euo pipefail

WAIT_SECONDS="${SERVICES_WAIT_SECONDS:-30}"
DATABASE_URL_="${DATABASE_URL:-postgres://postgres@127.0.0.1:5432/faceid}"
REDIS_URL_="${REDIS_URL:-redis://127.0.0.1:6379}"

log() { echo "ensure-services: $*"; }
die() { echo "ensure-services: ERROR: $*" >&2; exit 1; }
is_root() { [ "$(id -u)" = 0 ]; }
command -v timeout >/dev/null 2>&1 || timeout() { shift; "$@"; }

# parse_url URL DEFAULT_PORT -> "user password-set host port" (empty fields as '-')
URL_RE='^[A-Za-z][A-Za-z0-9+.-]*://(([^:@/]*)(:([^@/]*))?@)?(\[[^]]*\]|[^:/?#]*)(:([0-9]+))?'
parse_url() {
  local url="$1" default_port="$2"
  [[ "$url" =~ $URL_RE ]] || die "cannot parse URL: ${url%%@*}@..."
  local user="${BASH_REMATCH[2]}" pass="${BASH_REMATCH[4]}" host="${BASH_REMATCH[5]}" port="${BASH_REMATCH[7]}"
  host="${host#[}"; host="${host%]}"
  echo "${user:--} $([ -n "$pass" ] && echo set || echo -) ${host:-127.0.0.1} ${port:-$default_port}"
}

is_local() { case "$1" in 127.0.0.1|localhost|::1|0.0.0.0|'') return 0 ;; *) return 1 ;; esac; }

tcp_open() { timeout 3 bash -c "exec 3<>/dev/tcp/$1/$2" 2>/dev/null; }

wait_until() { # wait_until DESCRIPTION COMMAND...
  local what="$1"; shift
  local deadline=$(( $(date +%s) + WAIT_SECONDS ))
  until "$@"; do
    [ "$(date +%s)" -lt "$deadline" ] || return 1
    sleep 0.5
  done
  log "$what answers"
}

apt_install() {
  is_root || die "$* is not installed and this is not root: run  sudo apt-get update && sudo apt-get install -y $*"
  command -v apt-get >/dev/null 2>&1 || die "$* is not installed and there is no apt-get: install it with your package manager"
  export DEBIAN_FRONTEND=noninteractive
  local p need_update=0
  for p in "$@"; do apt-cache policy "$p" 2>/dev/null | grep 'Candidate: [^(]' >/dev/null || need_update=1; done
  if [ "$need_update" = 1 ]; then log "apt-get update"; apt-get update -qq; fi
  log "apt-get install -y $*"
  if ! apt-get install -y -qq "$@" >/dev/null; then
    apt-get update -qq
    apt-get install -y -qq "$@" >/dev/null
  fi
}

# ---- PostgreSQL ---------------------------------------------------------------------------------------
read -r PG_USER PG_PASS PG_HOST PG_PORT <<<"$(parse_url "$DATABASE_URL_" 5432)"

pg_answers() {
  if command -v pg_isready >/dev/null 2>&1; then
    pg_isready -q -h "$PG_HOST" -p "$PG_PORT" -t 3
  else
    tcp_open "$PG_HOST" "$PG_PORT"
  fi
}

# The postgres role over 127.0.0.1 without a password (what the tests use).
pg_trust_ok() {
  command -v psql >/dev/null 2>&1 || return 0
  PGCONNECT_TIMEOUT=3 psql -h "$PG_HOST" -p "$PG_PORT" -U postgres -d postgres -w -tAq -c 'select 1' >/dev/null 2>&1
}

pg_cluster() { # newest Debian cluster version, e.g. 15
  [ -d /etc/postgresql ] || return 1
  local v
  v="$(ls /etc/postgresql 2>/dev/null | sort -V | tail -n 1)"
  [ -n "$v" ] && [ -d "/etc/postgresql/$v/main" ] && echo "$v"
}

pg_start_cluster() {
  local v="$1"
  is_root || [ "$(id -un)" = postgres ] \
    || die "PostgreSQL $v/main is not running and this is not root: run  sudo pg_ctlcluster --skip-systemctl-redirect $v main start"
  log "starting PostgreSQL cluster $v/main"
  pg_ctlcluster --skip-systemctl-redirect "$v" main start 2>&1 | sed 's/^/ensure-services:   /' || true
}

pg_make_trust() {
  local v="$1" hba="/etc/postgresql/$1/main/pg_hba.conf"
  [ -f "$hba" ] || { log "WARNING: postgres@$PG_HOST:$PG_PORT needs a password and $hba is not there to fix"; return 0; }
  is_root || die "postgres@$PG_HOST:$PG_PORT refuses password-less login; add 'host all postgres 127.0.0.1/32 trust' to $hba (as root) and reload"
  if ! grep -q 'ensure-services.sh' "$hba"; then
    local tmp
    tmp="$(mktemp)"
    {
      echo "# added by scripts/ensure-services.sh: tests connect as postgres@127.0.0.1 without a password"
      echo "host    all    postgres    127.0.0.1/32    trust"
      echo "host    all    postgres    ::1/128         trust"
      cat "$hba"
    } >"$tmp"
    cat "$tmp" >"$hba"
    rm -f "$tmp"
    log "pg_hba.conf: trust for postgres over 127.0.0.1 and ::1 (first lines of $hba)"
  fi
  pg_ctlcluster --skip-systemctl-redirect "$v" main reload
}

ensure_postgres() {
  if ! is_local "$PG_HOST"; then
    wait_until "PostgreSQL at $PG_HOST:$PG_PORT (remote, only checked)" pg_answers \
      || die "PostgreSQL at $PG_HOST:$PG_PORT (DATABASE_URL) does not answer"
    return 0
  fi

  local v did=""
  if pg_answers; then
    did="already running"
  else
    if ! v="$(pg_cluster)" || ! command -v pg_ctlcluster >/dev/null 2>&1; then
      log "PostgreSQL server not installed"
      apt_install postgresql
      v="$(pg_cluster)" || die "apt-get installed postgresql but no cluster is under /etc/postgresql"
      did="installed"
    fi
    pg_answers || pg_start_cluster "$v"
    did="${did:+$did, }started $v/main"
    wait_until "PostgreSQL at $PG_HOST:$PG_PORT" pg_answers || {
      pg_lsclusters >&2 2>/dev/null || true
      die "PostgreSQL did not answer on $PG_HOST:$PG_PORT within ${WAIT_SECONDS}s"
    }
  fi

  # A URL with its own password is the operator's business; the default (no password) needs trust auth.
  if [ "$PG_PASS" = "-" ] && ! pg_trust_ok; then
    v="$(pg_cluster)" || { log "WARNING: postgres@$PG_HOST:$PG_PORT refuses password-less login (not a Debian cluster: left alone)"; return 0; }
    pg_make_trust "$v"
    did="${did:+$did, }trust auth added"
    wait_until "postgres@$PG_HOST:$PG_PORT without password" pg_trust_ok \
      || die "postgres@$PG_HOST:$PG_PORT still refuses password-less login"
  fi
  log "PostgreSQL $PG_HOST:$PG_PORT ok ($did)"
}

# ---- Redis ------------------------------------------------------------------------------------------------
read -r _R_USER REDIS_PASS REDIS_HOST REDIS_PORT <<<"$(parse_url "$REDIS_URL_" 6379)"

redis_answers() {
  local reply
  if command -v redis-cli >/dev/null 2>&1; then
    if [ "$REDIS_PASS" != "-" ]; then
      reply="$(timeout 3 redis-cli -u "$REDIS_URL_" --no-auth-warning ping 2>/dev/null || true)"
    else
      reply="$(timeout 3 redis-cli -h "$REDIS_HOST" -p "$REDIS_PORT" ping 2>/dev/null || true)"
    fi
  else
    reply="$(timeout 3 bash -c "exec 3<>/dev/tcp/$REDIS_HOST/$REDIS_PORT && printf 'PING\r\n' >&3 && head -c 64 <&3" 2>/dev/null || true)"
  fi
  case "$reply" in *PONG*|*NOAUTH*) return 0 ;; *) return 1 ;; esac
}

ensure_redis() {
  if ! is_local "$REDIS_HOST"; then
    wait_until "Redis at $REDIS_HOST:$REDIS_PORT (remote, only checked)" redis_answers \
      || die "Redis at $REDIS_HOST:$REDIS_PORT (REDIS_URL) does not answer"
    return 0
  fi
  local did=""
  if redis_answers; then
    did="already running"
  else
    if ! command -v redis-server >/dev/null 2>&1; then
      log "redis-server not installed"
      apt_install redis-server
      did="installed"
    fi
    # Debian's package may have started its own server on 6379.
    if ! redis_answers; then
      log "starting redis-server on 127.0.0.1:$REDIS_PORT (no persistence)"
      (cd "${TMPDIR:-/tmp}" && redis-server --daemonize yes --bind 127.0.0.1 --port "$REDIS_PORT" --save "" --appendonly no >/dev/null)
      did="${did:+$did, }started"
    fi
    wait_until "Redis at 127.0.0.1:$REDIS_PORT" redis_answers \
      || die "Redis did not answer on 127.0.0.1:$REDIS_PORT within ${WAIT_SECONDS}s"
  fi
  log "Redis $REDIS_HOST:$REDIS_PORT ok ($did)"
}

ensure_postgres
ensure_redis
