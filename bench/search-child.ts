/**
 * One measurement of bench/search.ts, in its own process (clean memory and cold-start figures).
 * Prints one JSON line. Not meant to be run by hand; see bench/search.ts.
 *
 *   mode "build": a replica starts with an empty snapshot directory, i.e. a full build (from
 *     PostgreSQL, or from the dataset file in the bounded 10M procedure), which writes a snapshot;
 *     then every probe goes through the search job's own path (`IndexReplica.knn`: minSeq check,
 *     micro-batching queue, engine, exact re-rank), one at a time; then 8 at once vs 8 one after
 *     the other; then the exact reference: an exhaustive float32 inner-product scan of the same
 *     normalised rows (the snapshot's vectors).
 *   mode "cold": a replica starts from that snapshot (process start -> serving), answers the first
 *     probes, which must equal the build's answers.
 */
import { closeSync, openSync, readFileSync, writeSync } from 'node:fs';
import { performance } from 'node:perf_hooks';
import { createDb } from '../platform/database/db.js';
import { createLogger } from '../platform/logger.js';
import { IndexReplica } from '../features/search/worker/replica.js';
import { SketchEngine, type SnapshotCheck } from '../features/search/worker/sketch-engine.js';
import { VectorStore } from '../features/search/worker/search-kernel.js';
import { FileChangeLogSource } from './search-file-source.js';
import { openDataset } from './search-data.js';
import { DIM, summarise, syntheticUserId } from './lib.js';

interface Args {
  mode: 'build' | 'cold';
  source: 'postgres' | 'file';
  db: string;
  dataset: string;
  factory: string;
  candidates: number;
  exactCandidates: number;
  snapshotDir: string;
  probes: number;
  exactProbes: number;
  speedupRounds: number;
  check: string[];
  /** cold: re-rank from this clear copy of the snapshot's rows (the clear reference); build: write that copy. */
  clearVectorsFile?: string;
  /** cold: the exact top-1 user of each probe (from the build's exact reference), for recall vs exact. */
  exactTop?: string[];
  /** cold: SEARCH_SNAPSHOT_CHECK of the replica (default background). */
  snapshotCheck?: SnapshotCheck;
}

const args = JSON.parse(process.argv[2] ?? '{}') as Args;
const K = 10;

function settledRss(): number {
  (globalThis as { gc?: () => void }).gc?.();
  (globalThis as { gc?: () => void }).gc?.();
  return process.memoryUsage().rss;
}

const rss0 = settledRss();
// Also with BENCH_SOURCE=file: the replica reads its erasures from the (empty) scratch database.
const db = createDb(args.db, 4, { bindModels: false });
const source = args.source === 'file' ? new FileChangeLogSource(args.dataset, `file-${args.dataset.replace(/[^a-z0-9]/gi, '_')}`) : undefined;
const replica = new IndexReplica(db as never, {
  factory: args.factory,
  nprobe: 32,
  syncIntervalMs: 0,
  pruneIntervalMs: 0,
  autoRebuild: false,
  snapshotDir: args.snapshotDir,
  rerankCandidates: args.candidates,
  exactCandidates: args.exactCandidates,
  maxBatch: 32,
  pageSize: 5000,
  logger: createLogger({ level: 'silent' }),
  source,
  clearVectorsFile: args.mode === 'cold' ? args.clearVectorsFile : undefined,
  snapshotCheck: args.snapshotCheck,
});

/** This process's resident memory by kind (/proc/self/status), MiB. */
function residentMiB(): { anonMiB: number; fileMiB: number; rssMiB: number } {
  const status = readFileSync('/proc/self/status', 'utf8');
  const kib = (k: string) => Number(new RegExp(`^${k}:\\s+(\\d+) kB`, 'm').exec(status)?.[1] ?? NaN);
  return { anonMiB: kib('RssAnon') / 1024, fileMiB: kib('RssFile') / 1024, rssMiB: kib('VmRSS') / 1024 };
}
const t0 = performance.now();
await replica.start();
const readyMs = performance.now(); // since this process started (performance.timeOrigin)
const readyCpu = process.cpuUsage(); // CPU of this process so far (start-up, load, catch-up)
const buildMs = readyMs - t0;
const rssAfter = settledRss();
const ds = openDataset(args.dataset);
const probe = (j: number) => ds.probes.subarray(j * DIM, (j + 1) * DIM);
const engine = replica.engine;

if (args.mode === 'cold') {
  const top1: string[] = [];
  for (let j = 0; j < args.check.length; j++) top1.push((await replica.knn(probe(j), K, '0')).hits[0]?.userId ?? '');
  const same = top1.every((u, j) => u === args.check[j]);
  const ready: Record<string, unknown> = {
    readyMs,
    readyCpuMs: (readyCpu.user + readyCpu.system) / 1000,
    buildMs,
    from: replica.stats.lastBuild?.from,
    same,
    checked: top1.length,
    refused: replica.stats.snapshotsRefused,
  };
  // With SEARCH_SNAPSHOT_CHECK=background (the default) the replica serves while its snapshot's rows
  // are still being authenticated: searches until that check ends (their latency: what a search sees
  // meanwhile), then the check's end, then the steady-state searches below.
  const q = Math.min(ds.q, args.probes);
  const checking = replica.engine.rowsChecked;
  const during: number[] = [];
  let rowsCheckedMs: number | null = null;
  if (checking) {
    let done = false;
    void checking.then(
      () => {
        done = true;
        rowsCheckedMs = performance.now();
      },
      () => {
        done = true;
      },
    );
    for (let j = 0; !done; j++) {
      const t = performance.now();
      await replica.knn(probe(j % q), K, '0');
      during.push(performance.now() - t);
    }
    await checking; // a damaged row fails the run
  }
  const duringS = during.length ? summarise(during) : null;
  Object.assign(ready, { rowsCheckedMs, duringSearches: during.length, duringP50Ms: duringS?.p50 ?? null, duringP99Ms: duringS?.p99 ?? null });
  // Then the searches, one at a time through the job path, and the memory they leave resident.

  for (let j = 0; j < Math.min(5, q); j++) await replica.knn(probe(j), K, '0');
  const lat: number[] = [];
  const cpu: number[] = [];
  let exactMate = 0,
    bothMate = 0,
    mate = 0,
    withMate = 0;
  for (let j = 0; j < q; j++) {
    const t = performance.now();
    const c0 = process.cpuUsage();
    const r = await replica.knn(probe(j), K, '0');
    const c = process.cpuUsage(c0);
    lat.push(performance.now() - t);
    cpu.push((c.user + c.system) / 1000);
    const got = r.hits[0]?.userId ?? '';
    if (ds.mates[j]! < 0) continue;
    withMate++;
    const mateId = syntheticUserId(ds.mates[j]!);
    if (got === mateId) mate++;
    if (args.exactTop?.[j] === mateId) {
      exactMate++;
      if (got === mateId) bothMate++;
    }
  }
  const s = summarise(lat);
  (globalThis as { gc?: () => void }).gc?.();
  const engine = replica.engine as SketchEngine;
  process.stdout.write(
    `${JSON.stringify({
      ...ready,
      sealed: engine.store.sealed(),
      probes: q,
      p50Ms: s.p50,
      p99Ms: s.p99,
      cpuP50Ms: summarise(cpu).p50,
      cpuP99Ms: summarise(cpu).p99,
      mateAt1: withMate ? mate / withMate : null,
      recallVsExact: exactMate ? bothMate / exactMate : null,
      indexMiB: engine.memoryBytes() / 2 ** 20,
      ...residentMiB(),
    })}\n`,
  );
} else {
  const q = Math.min(ds.q, args.probes);
  // Warm-up (page cache of the re-rank rows, JIT).
  for (let j = 0; j < Math.min(5, q); j++) await replica.knn(probe(j), K, '0');
  const lat: number[] = [];
  const cpu: number[] = [];
  const top1: string[] = [];
  let mate = 0,
    withMate = 0;
  for (let j = 0; j < q; j++) {
    const t = performance.now();
    const c0 = process.cpuUsage();
    const r = await replica.knn(probe(j), K, '0');
    const c = process.cpuUsage(c0);
    lat.push(performance.now() - t);
    cpu.push((c.user + c.system) / 1000);
    top1.push(r.hits[0]?.userId ?? '');
    if (ds.mates[j]! >= 0) {
      withMate++;
      if (r.hits[0]?.userId === syntheticUserId(ds.mates[j]!)) mate++;
    }
  }
  // 8 concurrent searches vs the same 8 one after the other, through the job path.
  let seqMs = 0,
    concMs = 0,
    seqCpu = 0,
    concCpu = 0;
  for (let round = 0; round < args.speedupRounds; round++) {
    const eight = Array.from({ length: 8 }, (_, i) => probe((round * 8 + i) % q));
    let t = performance.now();
    let c0 = process.cpuUsage();
    for (const p of eight) await replica.knn(p, K, '0');
    seqMs += performance.now() - t;
    let c = process.cpuUsage(c0);
    seqCpu += (c.user + c.system) / 1000;
    t = performance.now();
    c0 = process.cpuUsage();
    await Promise.all(eight.map((p) => replica.knn(p, K, '0')));
    concMs += performance.now() - t;
    c = process.cpuUsage(c0);
    concCpu += (c.user + c.system) / 1000;
  }
  // Exact reference over the same (normalised) rows.
  const eq = Math.min(q, args.exactProbes);
  const te = performance.now();
  let exactMate = 0,
    exactWithMate = 0,
    bothMate = 0,
    agree = 0;
  const store = engine instanceof SketchEngine ? engine.store : null;
  const exactTops: string[] = [];
  const userAt = (p: number) => (engine instanceof SketchEngine ? engine.userAt(p) : null);
  if (store) {
    for (let j0 = 0; j0 < eq; j0 += 64) {
      const m = Math.min(64, eq - j0);
      const qs = new Float32Array(m * DIM);
      for (let i = 0; i < m; i++) {
        const p = probe(j0 + i);
        let ss = 0;
        for (let d = 0; d < DIM; d++) ss += p[d]! * p[d]!;
        for (let d = 0; d < DIM; d++) qs[i * DIM + d] = p[d]! / Math.sqrt(ss);
      }
      const { labels } = store.exactSearch(qs, 1);
      for (let i = 0; i < m; i++) {
        const j = j0 + i;
        const exactTop = userAt(labels[i]!);
        exactTops[j] = exactTop ?? '';
        if (exactTop === top1[j]) agree++;
        if (ds.mates[j]! < 0) continue;
        exactWithMate++;
        const mateId = syntheticUserId(ds.mates[j]!);
        if (exactTop === mateId) {
          exactMate++;
          if (top1[j] === mateId) bothMate++;
        }
      }
    }
  }
  const exactMs = performance.now() - te;
  // The clear reference's file: the snapshot's rows in its row order, decrypted (the benchmark's own
  // data, like gallery.f32 beside it; the replica under test never writes one).
  if (args.clearVectorsFile && store) {
    const fd = openSync(args.clearVectorsFile, 'w', 0o600);
    for (let from = 0; from < store.rows(); from += 8192) {
      const rows = store.read(from, Math.min(8192, store.rows() - from));
      const bytes = new Uint8Array(rows.buffer, rows.byteOffset, rows.byteLength);
      for (let o = 0; o < bytes.length;) o += writeSync(fd, bytes, o, bytes.length - o);
    }
    closeSync(fd);
  }
  const approxMateOnExactSet = (() => {
    let m = 0,
      w = 0;
    for (let j = 0; j < eq; j++)
      if (ds.mates[j]! >= 0) {
        w++;
        if (top1[j] === syntheticUserId(ds.mates[j]!)) m++;
      }
    return w ? m / w : null;
  })();
  const s = summarise(lat);
  const sc = summarise(cpu);
  process.stdout.write(
    `${JSON.stringify({
      n: engine.size,
      factory: engine.effectiveFactory,
      candidates: args.candidates,
      exactCandidates: args.exactCandidates,
      buildMs,
      lastBuild: replica.stats.lastBuild,
      p50Ms: s.p50,
      p99Ms: s.p99,
      meanMs: s.mean,
      cpuP50Ms: sc.p50,
      cpuP99Ms: sc.p99,
      loadAverage: (await import('node:os')).loadavg(),
      probes: q,
      mateAt1: withMate ? mate / withMate : null,
      exactProbes: eq,
      mateAt1OnExactProbes: approxMateOnExactSet,
      mateAt1Exact: store && exactWithMate ? exactMate / exactWithMate : null,
      recallVsExact: store && exactMate ? bothMate / exactMate : null,
      top1AgreementWithExact: store && eq ? agree / eq : null,
      exactMsPerQuery: store && eq ? exactMs / eq : null,
      indexMiB: engine.memoryBytes() / 2 ** 20,
      rssGrowthMiB: (rssAfter - rss0) / 2 ** 20,
      seqMs,
      concMs,
      batchedSpeedup: concMs ? seqMs / concMs : null,
      batchedSpeedupCpu: concCpu ? seqCpu / concCpu : null,
      batches: replica.stats.batches,
      largestBatch: replica.stats.largestBatch,
      check: top1.slice(0, 50),
      exactTop: exactTops,
      ...residentMiB(),
    })}\n`,
  );
}
await replica.stop();
await db?.destroy();
void VectorStore;
process.exit(0);
