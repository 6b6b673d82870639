/**
 * Before/after of the sketch search at engine level, in ONE process on the same data (docs/performance.md
 * §2): the addon of an earlier commit (its SketchIndex.search + VectorStore.scores + the JS top-k that
 * SketchEngine.searchMany did then) against the current SketchEngine, rounds interleaved so that both
 * see the same machine load.
 *
 *   node --expose-gc --import tsx bench/search-ab.ts OLD_ADDON DIR [DIR...]
 *
 * OLD_ADDON: a faiss-node.node built from an earlier native/search-kernel/src/sketch.cc (binding version
 * 2: search(queries, k) without refine, scores(query, positions)). DIR as for bench/search-engine.ts
 * (its cached DIR/sketch-codes.bin and sketch-mean.f32 are used: run that first).
 */
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { DEFAULT_EXACT_CANDIDATES, SketchEngine } from '../features/search/worker/sketch-engine.js';
import { idTableOf } from '../features/search/worker/id-table.js';
import { SketchIndex, VectorStore } from '../features/search/worker/search-kernel.js';
import { openDataset } from './search-data.js';
import { DIM, summarise } from './lib.js';

interface OldAddon {
  SketchIndex: new (
    d: number,
    nbits: number,
    seed: number,
  ) => {
    setMean(m: Float32Array): void;
    addCodes(c: Uint8Array): number;
    search(q: Float32Array, k: number): { labels: Int32Array };
  };
  VectorStore: new (d: number, base: string, rows: number) => { scores(q: Float32Array, pos: Int32Array): Float32Array };
}
const [oldPath, ...dirs] = process.argv.slice(2);
if (!oldPath || !dirs.length) throw new Error('usage: search-ab.ts OLD_ADDON DIR [DIR...]');
const old = createRequire(import.meta.url)(path.resolve(oldPath)) as OldAddon;
const CANDIDATES = 2000,
  K = 10,
  ROUNDS = Number(process.env.BENCH_SPEEDUP_ROUNDS ?? 30),
  PROBES = Number(process.env.BENCH_PROBES ?? 200);
const cpuMs = (c: NodeJS.CpuUsage) => (c.user + c.system) / 1000;

function unit(qs: readonly Float32Array[]): Float32Array {
  const out = new Float32Array(qs.length * DIM);
  qs.forEach((q, i) => {
    let ss = 0;
    for (let d = 0; d < DIM; d++) ss += q[d]! * q[d]!;
    for (let d = 0; d < DIM; d++) out[i * DIM + d] = q[d]! / Math.sqrt(ss);
  });
  return out;
}

for (const dirArg of dirs) {
  const dir = path.resolve(dirArg);
  const ds = openDataset(dir);
  const mean = new Float32Array(new Uint8Array(readFileSync(path.join(dir, 'sketch-mean.f32'))).buffer);
  const codes = readFileSync(path.join(dir, 'sketch-codes.bin'));
  const ids = Array.from({ length: ds.n }, (_, i) => String(i));
  // Before: the earlier addon and the earlier searchMany (Hamming top 2000, then scores + JS top-k).
  const os1 = new old.SketchIndex(DIM, 512, 1_234_567);
  os1.setMean(mean);
  os1.addCodes(codes);
  const ostore = new old.VectorStore(DIM, path.join(dir, 'gallery.f32'), ds.n);
  const before = (queries: Float32Array[]): number[][] => {
    const q = unit(queries);
    const { labels } = os1.search(q, CANDIDATES);
    return queries.map((_, qi) => {
      const pos = labels.subarray(qi * CANDIDATES, (qi + 1) * CANDIDATES);
      const scores = ostore.scores(q.subarray(qi * DIM, (qi + 1) * DIM), pos);
      const best: number[] = [];
      const better = (a: number, b: number) => scores[a]! > scores[b]! || (scores[a] === scores[b] && pos[a]! < pos[b]!);
      for (let j = 0; j < CANDIDATES; j++) {
        if (pos[j]! < 0 || ids[pos[j]!] == null) continue;
        if (best.length === K && !better(j, best[K - 1]!)) continue;
        let at = best.length < K ? best.length : K - 1;
        if (best.length < K) best.push(j);
        while (at > 0 && better(j, best[at - 1]!)) {
          best[at] = best[at - 1]!;
          at--;
        }
        best[at] = j;
      }
      return best.map((j) => pos[j]!);
    });
  };
  // After: the current engine.
  const sk = new SketchIndex(DIM, 512, 1_234_567);
  sk.setMean(mean);
  sk.addCodes(codes);
  const engine = new SketchEngine(
    'BinarySketch512',
    512,
    { dim: DIM, candidates: CANDIDATES, exactCandidates: DEFAULT_EXACT_CANDIDATES },
    sk,
    new VectorStore(DIM, path.join(dir, 'gallery.f32'), ds.n),
    1,
    ds.n,
    idTableOf(ids),
  );
  const after = (queries: Float32Array[]): number[][] => engine.searchMany(queries, K).map((hits) => hits.map((h) => Number(h.userId)));
  const variants = { before, after } as const;
  const probe = (j: number) => ds.probes.subarray(j * DIM, (j + 1) * DIM);
  for (const f of Object.values(variants)) for (let j = 0; j < 5; j++) f([probe(j)]);
  const single: Record<string, { ms: number[]; cpu: number[]; top1: number[] }> = {
    before: { ms: [], cpu: [], top1: [] },
    after: { ms: [], cpu: [], top1: [] },
  };
  const nq = Math.min(ds.q, PROBES);
  for (let j = 0; j < nq; j++) {
    for (const [name, f] of j % 2 ? Object.entries(variants) : Object.entries(variants).reverse()) {
      const t = performance.now(),
        c = process.cpuUsage();
      const r = f([probe(j)])[0]!;
      single[name]!.cpu.push(cpuMs(process.cpuUsage(c)));
      single[name]!.ms.push(performance.now() - t);
      single[name]!.top1[j] = r[0] ?? -1;
    }
  }
  const eight: Record<string, { seq: number; batch: number; seqCpu: number; batchCpu: number; same: boolean }> = {};
  for (const name of Object.keys(variants)) eight[name] = { seq: 0, batch: 0, seqCpu: 0, batchCpu: 0, same: true };
  for (let round = 0; round < ROUNDS; round++) {
    const qs = Array.from({ length: 8 }, (_, i) => probe((round * 8 + i) % ds.q));
    for (const [name, f] of round % 2 ? Object.entries(variants) : Object.entries(variants).reverse()) {
      const e = eight[name]!;
      let t = performance.now(),
        c = process.cpuUsage();
      const one = qs.map((q) => f([q])[0]!);
      e.seqCpu += cpuMs(process.cpuUsage(c));
      e.seq += performance.now() - t;
      t = performance.now();
      c = process.cpuUsage();
      const many = f(qs);
      e.batchCpu += cpuMs(process.cpuUsage(c));
      e.batch += performance.now() - t;
      if (JSON.stringify(one) !== JSON.stringify(many)) e.same = false;
    }
  }
  let agree = 0,
    mateB = 0,
    mateA = 0;
  for (let j = 0; j < nq; j++) {
    if (single.before!.top1[j] === single.after!.top1[j]) agree++;
    if (single.before!.top1[j] === ds.mates[j]) mateB++;
    if (single.after!.top1[j] === ds.mates[j]) mateA++;
  }
  const fig = (name: string) => {
    const s = summarise(single[name]!.ms),
      c = summarise(single[name]!.cpu),
      e = eight[name]!;
    return {
      p50Ms: s.p50,
      p99Ms: s.p99,
      cpuP50Ms: c.p50,
      cpuP99Ms: c.p99,
      seqMsPer8: e.seq / ROUNDS,
      batchMsPer8: e.batch / ROUNDS,
      batchedSpeedup: e.seq / e.batch,
      batchedSpeedupCpu: e.seqCpu / e.batchCpu,
      batchEqualsSingle: e.same,
      mateAt1: (name === 'before' ? mateB : mateA) / nq,
    };
  };
  console.log(
    JSON.stringify({
      dataset: path.basename(dir),
      n: ds.n,
      probes: nq,
      rounds: ROUNDS,
      before: fig('before'),
      after: fig('after'),
      top1SameBeforeAfter: agree / nq,
      loadAverage: os.loadavg(),
    }),
  );
}
process.exit(0);
