/**
 * Shards against one index at engine level, against exact search (docs/performance.md §2 "Shards: the
 * whole top k against exact search"): one `BinarySketch512` engine over the whole dataset and one per
 * shard (rows split by the service's shard of the user id), each trained on a uniform sample of its own
 * rows as a full build is, every probe's top k merged as the web process merges; both held to the exact
 * top k (every row scored). No PostgreSQL, Redis or processes: the candidate counts alone.
 *
 *   node --import tsx bench/search-shards-engine.ts
 *   BENCH_N=200000 BENCH_CANDIDATES=8000 BENCH_EXACT_CANDIDATES=800 node --import tsx bench/search-shards-engine.ts
 *
 * Options: BENCH_N (200,000), BENCH_PROBES (300), BENCH_SHARDS (4), BENCH_CANDIDATES (2000),
 * BENCH_EXACT_CANDIDATES (200; 0: every candidate), BENCH_WORK_DIR (the dataset is generated there once,
 * the clustered generator of bench/search-data.ts, and kept).
 */
import { existsSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { SketchKind, type SketchEngine } from '../features/search/worker/sketch-engine.js';
import { VectorStore } from '../features/search/worker/search-kernel.js';
import { mergeShardHits, shardOf } from '../platform/jobs/search-shards.js';
import { generateDataset, openDataset, readGallery } from './search-data.js';
import { DIM, ROOT, syntheticUserId } from './lib.js';

const env = process.env;
const N = Number(env.BENCH_N ?? 200_000);
const PROBES = Number(env.BENCH_PROBES ?? 300);
const SHARDS = Number(env.BENCH_SHARDS ?? 4);
const C = Number(env.BENCH_CANDIDATES ?? 2000);
const E = Number(env.BENCH_EXACT_CANDIDATES ?? 200);
const K = 10;
const SAMPLE = 50_000;
const dir = path.join(path.resolve(env.BENCH_WORK_DIR ?? path.join(ROOT, 'var', 'bench', 'search-work')), `clustered-${N}`);

if (!existsSync(path.join(dir, 'mates.i32'))) generateDataset(dir, 'clustered', N, PROBES, console.log);
const ds = openDataset(dir);
const flat = new Float32Array(ds.n * DIM);
await readGallery(ds, 8192, (r0, rows) => void flat.set(rows, r0 * DIM));
const row = (i: number) => flat.subarray(i * DIM, (i + 1) * DIM);
const ids = Array.from({ length: ds.n }, (_, i) => syntheticUserId(i));
const kind = new SketchKind('BinarySketch512', { dim: DIM, candidates: C, exactCandidates: E });

/** An engine over these rows, trained on a uniform sample of them (as a full build of them is). */
function engineOf(rows: number[]): SketchEngine {
  const step = Math.max(1, Math.floor(rows.length / SAMPLE));
  const e = kind.createTrained(rows.filter((_, j) => j % step === 0).map(row));
  for (let o = 0; o < rows.length; o += 4096) e.upsertMany(rows.slice(o, o + 4096).map((i) => ({ userId: ids[i]!, vector: row(i) })));
  return e;
}

const all = Array.from({ length: ds.n }, (_, i) => i);
const single = engineOf(all);
const shards = Array.from({ length: SHARDS }, (_, s) => engineOf(all.filter((i) => shardOf(ids[i]!, SHARDS) === s)));
const store = new VectorStore(DIM, null, 0);
store.append(flat);
const exact = store.exactSearch(ds.probes, K);

let identical = 0;
let singleExact = 0;
let shardedExact = 0;
let shardedBelowSingle = 0;
for (let q = 0; q < ds.q; q++) {
  const probe = ds.probes.slice(q * DIM, (q + 1) * DIM);
  const a = single.searchMany([probe], K)[0]!;
  const b = mergeShardHits(
    shards.map((e, shard) => ({ shard, hits: e.searchMany([probe], K)[0]!, appliedSeq: '0', indexSize: e.size, ms: 0 })),
    K,
  );
  const truth = JSON.stringify(Array.from(exact.labels.subarray(q * K, (q + 1) * K), (l) => ids[l]));
  if (JSON.stringify(a) === JSON.stringify(b)) identical++;
  if (JSON.stringify(a.map((x) => x.userId)) === truth) singleExact++;
  if (JSON.stringify(b.map((x) => x.userId)) === truth) shardedExact++;
  if (a.some((x, r) => (b[r]?.score ?? -2) < x.score - 1e-6)) shardedBelowSingle++;
}
console.log(
  JSON.stringify({
    n: ds.n,
    probes: ds.q,
    shards: SHARDS,
    k: K,
    candidates: C,
    exactCandidates: E,
    identical,
    exact: { single: singleExact, sharded: shardedExact },
    shardedBelowSingle,
    loadAverage: os.loadavg(),
  }),
);
