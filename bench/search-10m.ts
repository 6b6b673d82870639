/**
 * The bounded 10M measurement of the `BinarySketch512` engine (docs/performance.md §2), for sizes
 * whose load through PostgreSQL (21 GB of table at 10M) and through the replica's JS build path would
 * not fit the time available on this machine:
 *
 *   npx tsx bench/search-10m.ts DIR        # DIR in the --dataset format, rows already unit vectors
 *
 * What it skips, and why that does not change what is measured: the rows are encoded straight from
 * DIR/gallery.f32 in 100k-row native calls (the replica does the same encode per page, plus reading
 * PostgreSQL and streaming the vectors into a snapshot), and `gallery.f32` itself is the memory-mapped
 * vector file of the exact re-rank (a snapshot's `vectors.f32` is the same layout). The search is the
 * engine's own `searchMany` (Hamming scan + exact re-rank of SEARCH_RERANK_CANDIDATES rows + top-k),
 * with the real id maps (10M strings in a Map); the replica's job path adds the minSeq check and the
 * batching queue, measured at 1M. Prints one JSON line.
 */
import { closeSync, openSync, readSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import os from 'node:os';
import { SketchEngine, SketchKind } from '../features/search/worker/sketch-engine.js';
import { idTableOf } from '../features/search/worker/id-table.js';
import { SketchIndex, VectorStore } from '../features/search/worker/search-kernel.js';
import { openDataset } from './search-data.js';
import { DIM, summarise } from './lib.js';

const dir = process.argv[2];
if (!dir) throw new Error('usage: search-10m.ts DIR');
const candidates = Number(process.env.BENCH_CANDIDATES ?? 2000);
const exactProbes = Number(process.env.BENCH_EXACT_PROBES ?? 64);
const probesWanted = Number(process.env.BENCH_PROBES ?? 200);
const ds = openDataset(dir);
const rss0 = process.memoryUsage().rss;
const t0 = performance.now();
const c0 = process.cpuUsage();

// Training: the mean of the first 50,000 rows (as a full build does).
const fd = openSync(path.join(dir, 'gallery.f32'), 'r');
const readRows = (r0: number, m: number) => {
  const bytes = new Uint8Array(m * DIM * 4);
  for (let o = 0; o < bytes.length;) o += readSync(fd, bytes, o, bytes.length - o, r0 * DIM * 4 + o);
  return new Float32Array(bytes.buffer);
};
const sample = readRows(0, Math.min(50_000, ds.n));
const mean = new Float32Array(DIM);
for (let i = 0; i < sample.length; i++) mean[i % DIM]! += sample[i]! / (sample.length / DIM);
const sketch = new SketchIndex(DIM, 512, 1_234_567); // the seed of sketch-engine.ts
sketch.setMean(mean);
for (let r0 = 0; r0 < ds.n; r0 += 100_000) {
  const m = Math.min(100_000, ds.n - r0);
  sketch.addCodes(sketch.encode(readRows(r0, m)));
  if (r0 % 1_000_000 === 0) console.error(`encoded ${r0.toLocaleString('en')} (${((performance.now() - t0) / 1000).toFixed(0)} s)`);
}
closeSync(fd);
const encodeS = (performance.now() - t0) / 1000;
const encodeCpu = process.cpuUsage(c0);
const store = new VectorStore(DIM, path.join(dir, 'gallery.f32'), ds.n);
const ids = Array.from({ length: ds.n }, (_, i) => `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`);
const kind = new SketchKind('BinarySketch512', { dim: DIM, candidates });
void kind;
console.error(`ids ready (${((performance.now() - t0) / 1000).toFixed(0)} s)`);
const engine = new SketchEngine('BinarySketch512', 512, { dim: DIM, candidates }, sketch, store, 50_000, ds.n, idTableOf(ids));
const buildS = (performance.now() - t0) / 1000;
(globalThis as { gc?: () => void }).gc?.();
const rssAfter = process.memoryUsage().rss;

console.error(`engine ready (${((performance.now() - t0) / 1000).toFixed(0)} s)`);
const probe = (j: number) => ds.probes.subarray(j * DIM, (j + 1) * DIM);
for (let j = 0; j < 3; j++) engine.searchMany([probe(j)], 10);
const lat: number[] = [],
  cpu: number[] = [];
const top1: number[] = [];
const nq = Math.min(ds.q, probesWanted);
for (let j = 0; j < nq; j++) {
  const t = performance.now();
  const c = process.cpuUsage();
  const hits = engine.searchMany([probe(j)], 10)[0]!;
  const dc = process.cpuUsage(c);
  lat.push(performance.now() - t);
  cpu.push((dc.user + dc.system) / 1000);
  top1.push(hits[0] ? Number(hits[0].userId.slice(24)) : -1);
}
// 8 at once in one engine call vs one at a time.
let seq = 0,
  batch = 0;
for (let round = 0; round < Number(process.env.BENCH_SPEEDUP_ROUNDS ?? 10); round++) {
  const eight = Array.from({ length: 8 }, (_, i) => probe((round * 8 + i) % nq));
  let t = performance.now();
  for (const p of eight) engine.searchMany([p], 10);
  seq += performance.now() - t;
  t = performance.now();
  engine.searchMany(eight, 10);
  batch += performance.now() - t;
}
console.error(`searched (${((performance.now() - t0) / 1000).toFixed(0)} s)`);
// Exact reference.
const eq = Math.min(nq, exactProbes);
const te = performance.now();
const qs = new Float32Array(eq * DIM);
for (let j = 0; j < eq; j++) {
  const p = probe(j);
  let ss = 0;
  for (let d = 0; d < DIM; d++) ss += p[d]! * p[d]!;
  for (let d = 0; d < DIM; d++) qs[j * DIM + d] = p[d]! / Math.sqrt(ss);
}
const exact = store.exactSearch(qs, 1);
const exactS = (performance.now() - te) / 1000;
let mate = 0,
  withMate = 0,
  exactMate = 0,
  both = 0;
for (let j = 0; j < nq; j++) {
  if (ds.mates[j]! < 0) continue;
  withMate++;
  if (top1[j] === ds.mates[j]) mate++;
  if (j < eq && exact.labels[j] === ds.mates[j]) {
    exactMate++;
    if (top1[j] === ds.mates[j]) both++;
  }
}
const s = summarise(lat),
  sc = summarise(cpu);
console.log(
  JSON.stringify({
    n: ds.n,
    factory: 'BinarySketch512',
    candidates,
    p50Ms: s.p50,
    p99Ms: s.p99,
    cpuP50Ms: sc.p50,
    cpuP99Ms: sc.p99,
    mateAt1: mate / withMate,
    mateAt1Exact: exactMate / Math.max(1, Math.min(eq, withMate)),
    recallVsExact: exactMate ? both / exactMate : null,
    exactProbes: eq,
    exactS,
    indexMiB: engine.memoryBytes() / 2 ** 20,
    rssGrowthMiB: (rssAfter - rss0) / 2 ** 20,
    encodeS,
    encodeCpuS: (encodeCpu.user + encodeCpu.system) / 1e6,
    buildS,
    batchedSpeedup: seq / batch,
    loadAverage: os.loadavg(),
  }),
);
process.exit(0);
