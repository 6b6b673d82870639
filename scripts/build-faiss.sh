#!/usr/bin/env bash
# Makes require('faiss-node') loadable (see docs/dependencies.md).
#
# faiss-node's own install script (disabled by package.json "allowScripts") downloads a prebuilt addon
# from GitHub and falls back to a git clone of faiss: both fail on machines that reach only the npm
# registry and Debian's packages. So, on a machine with apt-get, this script:
#   1. installs libfaiss-dev + libopenblas-dev (Debian 12: faiss 1.7.3 with a static libfaiss.a) if missing;
#   2. copies faiss-node's src/*.cc into a temporary folder, patched for the system faiss version
#      (faiss 1.7.3 spells the id type faiss::Index::idx_t, faiss-node says faiss::idx_t);
#   3. builds it with npm's bundled node-gyp and native/search-kernel/binding.gyp (-std=c++17 -fexceptions
#      -frtti -O3; node-gyp's default -fno-rtti makes write() segfault), linking
#      libfaiss.a -lblas -llapack -fopenmp;
#   4. installs the result as node_modules/faiss-node/build/Release/faiss-node.node, where faiss-node's
#      `bindings` loader looks.
# Without apt-get (macOS, other Linux), or without root and with the packages missing, it runs faiss-node's
# own prebuilt download instead (prebuild-install --runtime napi, needs internet).
# Either way it ends with a functional check (flat IP add/search, removeIds, toBuffer/fromBuffer,
# write/read, IVF64,Flat train/add/search).
#
# Exits at once when faiss-node already loads. FAISS_FORCE_BUILD=1 rebuilds anyway.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
FAISS_NODE_DIR="$ROOT/node_modules/faiss-node"
ADDON="$FAISS_NODE_DIR/build/Release/faiss-node.node"
GYP_FILE="$ROOT/native/search-kernel/binding.gyp"
APT_PACKAGES=(libfaiss-dev libopenblas-dev)

log() { echo "build-faiss: $*"; }
die() { echo "build-faiss: ERROR: $*" >&2; exit 1; }

# The project's own classes (native/search-kernel/src/*.cc) must be in the addon too, at this version.
PROJECT_BINDING_VERSION=8
faiss_loads() {
  node --input-type=commonjs -e "require('faiss-node'); const b = require('$ADDON'); if (b.projectBindingVersion !== $PROJECT_BINDING_VERSION) process.exit(3)" >/dev/null 2>&1
}

# ---- fast path --------------------------------------------------------------------------------------
if [ "${FAISS_FORCE_BUILD:-0}" != 1 ] && faiss_loads; then
  log "faiss-node loads; nothing to do"
  exit 0
fi

[ -f "$FAISS_NODE_DIR/package.json" ] || die "node_modules/faiss-node is missing: run 'npm ci' first"

# ---- functional check, run at the end ---------------------------------------------------------------
verify() {
  local tmp
  tmp="$(mktemp -d "${TMPDIR:-/tmp}/faiss-verify.XXXXXX")"
  if ! FAISS_VERIFY_DIR="$tmp" node --input-type=commonjs - <<'JS'
const assert = require('node:assert/strict');
const path = require('node:path');
const { IndexFlatIP, Index, MetricType } = require('faiss-node');
const d = 512;
let seed = 12345;
const rand = () => ((seed = (seed * 1103515245 + 12345) % 2147483648) / 2147483648) - 0.5;
const unit = () => {
  const v = Array.from({ length: d }, rand);
  const n = Math.hypot(...v);
  return v.map((x) => x / n);
};
const vectors = (n) => Array.from({ length: n }, unit);

// IndexFlatIP: add, search, removeIds (renumbers the rest), toBuffer/fromBuffer, write/read.
const xs = vectors(200);
const flat = new IndexFlatIP(d);
flat.add(xs.flat());
assert.equal(flat.ntotal(), 200);
let r = flat.search(xs[17], 3);
assert.equal(r.labels[0], 17);
assert.ok(Math.abs(r.distances[0] - 1) < 1e-4, `self-similarity ${r.distances[0]}`);
assert.equal(flat.removeIds([0, 1, 2]), 3);
assert.equal(flat.ntotal(), 197);
r = flat.search(xs[17], 1);
assert.equal(r.labels[0], 14);
const copy = IndexFlatIP.fromBuffer(flat.toBuffer());
assert.equal(copy.ntotal(), 197);
assert.equal(copy.search(xs[17], 1).labels[0], 14);
const file = path.join(process.env.FAISS_VERIFY_DIR, 'flat.index');
flat.write(file);
assert.equal(IndexFlatIP.read(file).search(xs[42], 1).labels[0], 39);

// IVF64,Flat with inner product: train, add, search, round trip through a buffer.
const ivf = Index.fromFactory(d, 'IVF64,Flat', MetricType.METRIC_INNER_PRODUCT);
assert.equal(ivf.isTrained(), false);
ivf.train(vectors(64 * 40).flat());
assert.equal(ivf.isTrained(), true);
ivf.add(xs.flat());
assert.equal(ivf.ntotal(), 200);
assert.equal(ivf.search(xs[5], 2).labels[0], 5);
const ivf2 = Index.fromBuffer(ivf.toBuffer());
assert.equal(ivf2.search(xs[123], 1).labels[0], 123);
// The project's SketchIndex / VectorStore (native/search-kernel/src/sketch.cc).
const ext = require(require('path').join(require('path').dirname(require.resolve('faiss-node/package.json')), 'build/Release/faiss-node.node'));
const sk = new ext.SketchIndex(d, 512, 1234);
const xf = new Float32Array(xs.flat());
sk.addCodes(sk.encode(xf));
assert.equal(sk.ntotal(), 200);
const sr = sk.search(new Float32Array(xs[17]), 3);
assert.equal(sr.labels[0], 17);
assert.equal(sr.distances[0], 0);
sk.setDead(new Int32Array([17]), true);
assert.notEqual(sk.search(new Float32Array(xs[17]), 3).labels[0], 17);
const vs = new ext.VectorStore(d, null, 0);
vs.append(xf);
assert.ok(Math.abs(vs.scores(new Float32Array(xs[9]), new Int32Array([9]))[0] - 1) < 1e-4);
console.log('build-faiss: verified faiss-node (IndexFlatIP add/search/removeIds/toBuffer/fromBuffer/write/read, IVF64,Flat IP train/add/search, SketchIndex, VectorStore)');
JS
  then
    rm -rf "$tmp"
    die "faiss-node loads but its functional check failed (see above)"
  fi
  rm -rf "$tmp"
}

# ---- fallback: faiss-node's own prebuilt addon (needs internet) -------------------------------------
prebuilt_fallback() {
  log "$1: running faiss-node's own prebuilt download (prebuild-install --runtime napi, needs internet)"
  local bin
  bin="$(node -p "require.resolve('prebuild-install/bin.js', { paths: [process.argv[1]] })" "$FAISS_NODE_DIR" 2>/dev/null || true)"
  if [ -n "$bin" ]; then
    (cd "$FAISS_NODE_DIR" && node "$bin" --runtime napi --verbose)
  else
    (cd "$FAISS_NODE_DIR" && npx --yes prebuild-install --runtime napi --verbose)
  fi
}

# ---- system packages ----------------------------------------------------------------------------------
missing_packages() {
  local p
  for p in "${APT_PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep 'ok installed' >/dev/null || echo "$p"
  done
  command -v g++ >/dev/null 2>&1 || echo g++
  command -v make >/dev/null 2>&1 || echo make
  command -v python3 >/dev/null 2>&1 || echo python3
}

apt_install() {
  export DEBIAN_FRONTEND=noninteractive
  local p need_update=0
  for p in "$@"; do
    apt-cache policy "$p" 2>/dev/null | grep 'Candidate: [^(]' >/dev/null || need_update=1
  done
  if [ "$need_update" = 1 ]; then
    log "apt-get update"
    apt-get update -qq
  fi
  log "apt-get install -y $*"
  if ! apt-get install -y -qq --no-install-recommends "$@" >/dev/null; then
    # A stale package list can name files the mirror no longer has: refresh once and retry.
    apt-get update -qq
    apt-get install -y -qq --no-install-recommends "$@" >/dev/null
  fi
}

find_node_gyp() {
  local npm_bin npm_real prefix c
  npm_bin="$(command -v npm || true)"
  [ -n "$npm_bin" ] || return 1
  npm_real="$(readlink -f "$npm_bin" 2>/dev/null || echo "$npm_bin")"
  prefix="$(npm prefix -g 2>/dev/null || true)"
  for c in \
    "$prefix/lib/node_modules/npm/node_modules/node-gyp/bin/node-gyp.js" \
    "$(dirname "$npm_bin")/../lib/node_modules/npm/node_modules/node-gyp/bin/node-gyp.js" \
    "$(dirname "$npm_real")/../node_modules/node-gyp/bin/node-gyp.js" \
    "$ROOT/node_modules/node-gyp/bin/node-gyp.js"; do
    if [ -f "$c" ]; then
      readlink -f "$c"
      return 0
    fi
  done
  return 1
}

build_from_system_faiss() {
  local multiarch inc lib d faiss_libs addon_api node_gyp node_prefix work
  local -a gyp_args=()

  inc=""
  for d in /usr/include /usr/local/include; do
    [ -f "$d/faiss/IndexFlat.h" ] && { inc="$d"; break; }
  done
  [ -n "$inc" ] || die "faiss headers not found (faiss/IndexFlat.h) although ${APT_PACKAGES[*]} are installed"

  multiarch="$(gcc -print-multiarch 2>/dev/null || true)"
  faiss_libs=""
  for d in ${multiarch:+/usr/lib/$multiarch} /usr/lib /usr/local/lib /usr/lib64; do
    if [ -f "$d/libfaiss.a" ]; then faiss_libs="$d/libfaiss.a"; break; fi
  done
  if [ -z "$faiss_libs" ]; then
    for d in ${multiarch:+/usr/lib/$multiarch} /usr/lib /usr/local/lib /usr/lib64; do
      if [ -f "$d/libfaiss.so" ]; then faiss_libs="-L$d -lfaiss"; break; fi
    done
  fi
  [ -n "$faiss_libs" ] || die "libfaiss.a (or libfaiss.so) not found"
  faiss_libs="$faiss_libs -lblas -llapack"

  addon_api="$(node -p "require('path').dirname(require.resolve('node-addon-api/package.json', { paths: [process.argv[1]] }))" "$FAISS_NODE_DIR" 2>/dev/null)" \
    || die "node-addon-api (a dependency of faiss-node) not found: run 'npm ci'"
  node_gyp="$(find_node_gyp)" || die "npm's bundled node-gyp not found (looked under $(npm prefix -g 2>/dev/null)/lib/node_modules/npm)"

  # Node's headers: use the ones installed beside node (Debian's nodejs, the official tarball) or npm's
  # nodedir setting; otherwise node-gyp downloads them (works only with internet).
  node_prefix="$(dirname "$(dirname "$(node -p process.execPath)")")"
  if [ -n "${npm_config_nodedir:-}" ]; then
    gyp_args+=("--nodedir=$npm_config_nodedir")
  elif [ -f "$node_prefix/include/node/node_api.h" ]; then
    gyp_args+=("--nodedir=$node_prefix")
  fi

  work="$(mktemp -d "${TMPDIR:-/tmp}/faiss-node-build.XXXXXX")"
  # shellcheck disable=SC2064
  trap "rm -rf '$work'" EXIT
  mkdir -p "$work/src"
  cp "$GYP_FILE" "$work/binding.gyp"
  cp "$FAISS_NODE_DIR"/src/*.cc "$work/src/"
  cp "$FAISS_NODE_DIR"/src/*.h "$work/src/" 2>/dev/null || true
  # The project's own classes (SketchIndex, VectorStore): compiled into the same addon and registered
  # from faiss-node's Init.
  cp "$ROOT"/native/search-kernel/src/*.cc "$ROOT"/native/search-kernel/src/*.h "$work/src/"
  grep -q 'IndexFlatIP::Init(env, exports);' "$work/src/faiss.cc" || die "faiss-node's Init no longer looks as expected"
  sed -i 's/^Napi::Object Init(Napi::Env env, Napi::Object exports)$/Napi::Object ProjectExtensionsInit(Napi::Env env, Napi::Object exports);\n&/; s/IndexFlatIP::Init(env, exports);/&\n  ProjectExtensionsInit(env, exports);/' "$work/src/faiss.cc"
  grep -q 'ProjectExtensionsInit(env, exports);' "$work/src/faiss.cc" || die "could not register the project's classes in faiss-node's Init"

  # faiss >= 1.7.4 declares faiss::idx_t at namespace level; 1.7.3 (Debian 12) only has faiss::Index::idx_t.
  if ! grep -Eqs 'using[[:space:]]+idx_t[[:space:]]*=|typedef[^;]*[[:space:]]idx_t[[:space:]]*;' "$inc/faiss/MetricType.h"; then
    sed -i 's/faiss::idx_t/faiss::Index::idx_t/g' "$work"/src/*.cc
    log "patched a copy of faiss-node's source: faiss::idx_t -> faiss::Index::idx_t (system faiss predates 1.7.4)"
  fi

  log "compiling faiss-node against ${faiss_libs%% *} with npm's node-gyp $(node "$node_gyp" --version 2>/dev/null | tr -d v)"
  if ! (cd "$work" && NODE_ADDON_API_DIR="$addon_api" FAISS_INCLUDE_DIRS="$([ "$inc" = /usr/include ] || echo "$inc")" \
        FAISS_LIBS="$faiss_libs" node "$node_gyp" rebuild --release --jobs=max "${gyp_args[@]}" >"$work/build.log" 2>&1); then
    tail -n 40 "$work/build.log" >&2
    die "node-gyp build of faiss-node failed (last lines above)"
  fi
  [ -f "$work/build/Release/faiss-node.node" ] || die "node-gyp finished without producing faiss-node.node"

  # Install atomically: a concurrent `require('faiss-node')` never sees a half-written file.
  mkdir -p "$(dirname "$ADDON")"
  cp "$work/build/Release/faiss-node.node" "$ADDON.partial.$$"
  mv -f "$ADDON.partial.$$" "$ADDON"
  rm -rf "$work"
  trap - EXIT
  log "installed node_modules/faiss-node/build/Release/faiss-node.node"
}

# ---- main ---------------------------------------------------------------------------------------------
start=$(date +%s)
if [ "$(uname -s)" = Linux ] && command -v apt-get >/dev/null 2>&1 && command -v dpkg-query >/dev/null 2>&1; then
  mapfile -t missing < <(missing_packages)
  if [ "${#missing[@]}" -gt 0 ]; then
    if [ "$(id -u)" = 0 ]; then
      apt_install "${missing[@]}"
    else
      prebuilt_fallback "not root and missing ${missing[*]}" && faiss_loads && { verify; exit 0; }
      die "faiss-node needs the system packages: ${missing[*]}. Install them as root and run this again:
    sudo apt-get update && sudo apt-get install -y ${missing[*]}"
    fi
  fi
  build_from_system_faiss
else
  prebuilt_fallback "no apt-get on this machine ($(uname -s))" \
    || die "faiss-node's prebuilt download failed; without apt-get this needs internet (see docs/dependencies.md)"
fi

faiss_loads || die "faiss-node still does not load: $(node --input-type=commonjs -e "require('faiss-node')" 2>&1 | grep -m1 -i error)"
verify
log "done in $(( $(date +%s) - start )) s"
