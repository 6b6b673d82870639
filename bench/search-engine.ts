/**
 * Engine-level measurement of the `BinarySketch` search (docs/performance.md §2): where one search's
 * time goes, micro-batching at engine level, and recall against the exact answer by candidate count.
 * For iterating on the native kernel; the figures of record come from `npm run bench -- search`.
 *
 *   node --expose-gc --import tsx bench/search-engine.ts DIR [DIR...]
 *
 * DIR in the --dataset format (bench/search-data.ts) with unit rows (the generators write unit rows);
 * `gallery.f32` itself is the memory-mapped vector file of the re-rank. Codes are cached in
 * DIR/sketch-codes.bin (delete it after changing the encoding). If DIR/exact-top10.i32 exists (Q x 10
 * int32: the exact top 10 of each probe), recall is measured against it; else the exact top-1 of the
 * first BENCH_EXACT_PROBES probes (default 200) is computed with VectorStore.exactSearch.
 * Options: BENCH_PROBES (default 200), BENCH_CANDIDATES (default 2000), BENCH_EXACT_CANDIDATES (default
 * SEARCH_EXACT_CANDIDATES' default; 0: every Hamming candidate), BENCH_REFINE (list), BENCH_SPEEDUP_ROUNDS (30),
 * BENCH_RECALL_CANDIDATES (list, default 100,200,500,1000,2000).
 */
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { DEFAULT_EXACT_CANDIDATES, SketchEngine } from '../features/search/worker/sketch-engine.js';
import { idTableOf } from '../features/search/worker/id-table.js';
import { SketchIndex, VectorStore, fastIsa, scanIsa } from '../features/search/worker/search-kernel.js';
import { openDataset, readGallery } from './search-data.js';
import { DIM, summarise } from './lib.js';

const env = process.env;
const PROBES = Number(env.BENCH_PROBES ?? 200);
const CANDIDATES = Number(env.BENCH_CANDIDATES ?? 2000);
const EXACT_CANDIDATES = Number(env.BENCH_EXACT_CANDIDATES ?? DEFAULT_EXACT_CANDIDATES);
const ROUNDS = Number(env.BENCH_SPEEDUP_ROUNDS ?? 30);
const EXACT_PROBES = Number(env.BENCH_EXACT_PROBES ?? 200);
const RECALL_AT = (env.BENCH_RECALL_CANDIDATES ?? '100,200,500,1000,2000').split(',').map(Number);
const SEED = 1_234_567;
const cpuMs = (c: NodeJS.CpuUsage) => (c.user + c.system) / 1000;

async function one(dir: string) {
  const ds = openDataset(dir);
  const t0 = performance.now();
  const sketch = new SketchIndex(DIM, 512, SEED);
  const codesFile = path.join(dir, 'sketch-codes.bin');
  const meanFile = path.join(dir, 'sketch-mean.f32');
  if (existsSync(codesFile) && existsSync(meanFile)) {
    sketch.setMean(new Float32Array(new Uint8Array(readFileSync(meanFile)).buffer));
    sketch.addCodes(readFileSync(codesFile));
  } else {
    const mean = new Float32Array(DIM);
    await readGallery(ds, 50_000, (r0, rows) => {
      if (r0 > 0) return;
      for (let i = 0; i < rows.length; i++) mean[i % DIM]! += rows[i]! / (rows.length / DIM);
    });
    sketch.setMean(mean);
    await readGallery(ds, 65_536, (_r0, rows) => void sketch.addCodes(sketch.encode(rows)));
    writeFileSync(meanFile, new Uint8Array(mean.buffer));
    writeFileSync(codesFile, sketch.getCodes(0, ds.n));
  }
  const store = new VectorStore(DIM, path.join(dir, 'gallery.f32'), ds.n);
  const ids = Array.from({ length: ds.n }, (_, i) => String(i));
  const engine = new SketchEngine(
    'BinarySketch512',
    512,
    { dim: DIM, candidates: CANDIDATES, exactCandidates: EXACT_CANDIDATES },
    sketch,
    store,
    50_000,
    ds.n,
    idTableOf(ids),
  );
  const loadS = (performance.now() - t0) / 1000;
  const probe = (j: number) => ds.probes.subarray(j * DIM, (j + 1) * DIM);
  const nq = Math.min(ds.q, PROBES);
  for (let j = 0; j < 5; j++) engine.searchMany([probe(j)], 10);

  // Where one search's time goes: the native scan + selection, the re-rank reads + dot products, the rest.
  const scanMs: number[] = [],
    rerankMs: number[] = [],
    totalMs: number[] = [],
    totalCpu: number[] = [];
  const ru0 = process.resourceUsage();
  for (let j = 0; j < nq; j++) {
    const q = probe(j);
    let t = performance.now();
    const { labels } = sketch.search(q, CANDIDATES, EXACT_CANDIDATES);
    scanMs.push(performance.now() - t);
    t = performance.now();
    store.rerank(q, labels, 10);
    rerankMs.push(performance.now() - t);
  }
  const ru1 = process.resourceUsage();
  // Fresh probes for the full path (the re-rank rows of the ones above are now mapped).
  const top1: number[] = [];
  for (let j = 0; j < nq; j++) {
    const t = performance.now();
    const c = process.cpuUsage();
    const hits = engine.searchMany([probe(j)], 10)[0]!;
    totalCpu.push(cpuMs(process.cpuUsage(c)));
    totalMs.push(performance.now() - t);
    top1.push(hits[0] ? Number(hits[0].userId) : -1);
  }
  // 8 at once (one engine call) vs the same 8 one after the other; identical answers required.
  let seqMs = 0,
    batchMs = 0,
    seqCpu = 0,
    batchCpu = 0,
    same = true;
  for (let round = 0; round < ROUNDS; round++) {
    const eight = Array.from({ length: 8 }, (_, i) => probe((round * 8 + i) % ds.q));
    let t = performance.now();
    let c = process.cpuUsage();
    const one = eight.map((p) => engine.searchMany([p], 10)[0]!);
    seqCpu += cpuMs(process.cpuUsage(c));
    seqMs += performance.now() - t;
    t = performance.now();
    c = process.cpuUsage();
    const many = engine.searchMany(eight, 10);
    batchCpu += cpuMs(process.cpuUsage(c));
    batchMs += performance.now() - t;
    if (JSON.stringify(one) !== JSON.stringify(many)) same = false;
  }
  // The batch's two native stages alone: the shared scan, then the per-query re-rank.
  let scan8 = 0,
    rerank8 = 0;
  for (let round = 0; round < ROUNDS; round++) {
    const eight = new Float32Array(8 * DIM);
    for (let i = 0; i < 8; i++) eight.set(probe((round * 8 + i) % ds.q), i * DIM);
    let t = performance.now();
    const { labels } = sketch.search(eight, CANDIDATES, EXACT_CANDIDATES);
    scan8 += performance.now() - t;
    t = performance.now();
    store.rerank(eight, labels, 10);
    rerank8 += performance.now() - t;
  }
  // Recall vs exact by candidate count: where the exact top-1 sits in the Hamming order.
  const exactFile = path.join(dir, 'exact-top10.i32');
  let exactTop1: Int32Array;
  let rq: number;
  if (existsSync(exactFile)) {
    exactTop1 = Int32Array.from(new Int32Array(new Uint8Array(readFileSync(exactFile)).buffer).filter((_, i) => i % 10 === 0));
    rq = ds.q;
  } else {
    rq = Math.min(ds.q, EXACT_PROBES);
    exactTop1 = store.exactSearch(ds.probes.subarray(0, rq * DIM), 1).labels;
  }
  const maxC = Math.max(...RECALL_AT);
  const rankOfExact: number[] = [];
  let mateExact = 0,
    mateAt1 = 0;
  for (let j = 0; j < rq; j++) {
    const { labels } = sketch.search(probe(j), maxC);
    rankOfExact.push(labels.indexOf(exactTop1[j]!));
    if (ds.mates[j] === exactTop1[j]) mateExact++;
    const hits = engine.searchMany([probe(j)], 1)[0]!;
    if (hits[0] && Number(hits[0].userId) === ds.mates[j]) mateAt1++;
  }
  // The refine step (refine 0: every Hamming candidate) (asymmetric estimate of the Hamming candidates, then the exact re-rank of the best
  // `refine`): is the exact top 1 (and the whole exact top 10) still among them?
  const REFINE = (env.BENCH_REFINE ?? '50,100,200,500').split(',').map(Number);
  const top10 = existsSync(exactFile) ? new Int32Array(new Uint8Array(readFileSync(exactFile)).buffer) : null;
  const top10s = existsSync(path.join(dir, 'exact-top10.f32'))
    ? new Float32Array(new Uint8Array(readFileSync(path.join(dir, 'exact-top10.f32'))).buffer)
    : null;
  const refined: Record<number, { top1: number; top10: number; above03: number | null }> = {};
  for (const m of [...REFINE, 0]) {
    let t1 = 0,
      t10 = 0,
      hi = 0,
      hiFound = 0;
    for (let j = 0; j < rq; j++) {
      const { labels } = sketch.search(probe(j), CANDIDATES, m);
      const set = new Set(labels);
      if (set.has(exactTop1[j]!)) t1++;
      if (top10 && Array.from(top10.subarray(j * 10, j * 10 + 10)).every((r) => set.has(r))) t10++;
      // Exact top-10 hits at cosine >= 0.3 (anything a threshold could accept), found?
      if (top10 && top10s)
        for (let i = 0; i < 10; i++)
          if (top10s[j * 10 + i]! >= 0.3) {
            hi++;
            if (set.has(top10[j * 10 + i]!)) hiFound++;
          }
    }
    refined[m] = { top1: t1 / rq, top10: t10 / rq, above03: hi ? hiFound / hi : null };
  }
  const found = rankOfExact.filter((r) => r >= 0);
  const recall = Object.fromEntries(RECALL_AT.map((c) => [c, rankOfExact.filter((r) => r >= 0 && r < c).length / rq]));
  const s = summarise(totalMs),
    sc = summarise(totalCpu),
    ss = summarise(scanMs),
    sr = summarise(rerankMs);
  return {
    dataset: path.basename(dir),
    n: ds.n,
    candidates: CANDIDATES,
    exactCandidates: EXACT_CANDIDATES,
    fastIsa,
    scanIsa,
    loadS,
    searchP50Ms: s.p50,
    searchP99Ms: s.p99,
    cpuP50Ms: sc.p50,
    cpuP99Ms: sc.p99,
    scanSelectP50Ms: ss.p50,
    scanSelectMeanMs: ss.mean,
    rerankP50Ms: sr.p50,
    rerankMeanMs: sr.mean,
    rerankMinorFaultsPerSearch: (ru1.minorPageFault - ru0.minorPageFault) / nq,
    rerankMajorFaultsPerSearch: (ru1.majorPageFault - ru0.majorPageFault) / nq,
    seqMsPer8: seqMs / ROUNDS,
    batchMsPer8: batchMs / ROUNDS,
    batchedSpeedup: seqMs / batchMs,
    batchedSpeedupCpu: seqCpu / batchCpu,
    batchEqualsSingle: same,
    batchScanMsPer8: scan8 / ROUNDS,
    batchRerankMsPer8: rerank8 / ROUNDS,
    recallProbes: rq,
    mateAt1Exact: mateExact / rq,
    mateAt1: mateAt1 / rq,
    exactTop1InCandidates: recall,
    worstRankOfExactTop1: found.length ? Math.max(...found) : null,
    missing: rq - found.length,
    exactInRefined: refined,
    populated: store.populated(),
    rescans: sketch.rescans(),
    loadAverage: os.loadavg(),
  };
}

for (const dir of process.argv.slice(2)) console.log(JSON.stringify(await one(path.resolve(dir))));
process.exit(0);
