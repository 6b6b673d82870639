/**
 * One measurement of bench/search.ts, in its own process (clean memory figures): build one index type
 * from the scratch database exactly as a search worker does (workers/search/replica.ts), then time
 * queries. Prints one JSON line. Not meant to be run by hand; see bench/search.ts.
 *
 * The special factory `js` is the baseline: every vector loaded into one Float32Array and scanned by a
 * plain JavaScript loop (exact).
 */
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { createDb } from '../shared/db.js';
import { decodeEmbedding } from '../shared/embeddings.js';
import { createLogger } from '../shared/logger.js';
import { IndexReplica } from '../workers/search/replica.js';
import { DIM, probeVector, queriedIdentities, summarise, syntheticUserId } from './lib.js';

interface Args {
  db: string;
  size: number;
  factory: string;
  nprobes: number[];
  single: number;
  batched: number;
  batch: number;
  knn: number;
  rebuild: boolean;
}

function parseArgs(): Args {
  const a = JSON.parse(process.argv[2] ?? '{}') as Partial<Args>;
  if (!a.db || !a.size || !a.factory) throw new Error('usage: search-child.ts <json args>');
  return { nprobes: [32], single: 100, batched: 500, batch: 100, knn: 100, rebuild: true, ...a } as Args;
}

const K = 10;

async function jsBaseline(args: Args) {
  const rss0 = settledRss();
  const t0 = performance.now();
  const client = new pg.Client({ connectionString: args.db });
  await client.connect();
  const data = new Float32Array(args.size * DIM);
  const ids: string[] = [];
  let after = '00000000-0000-0000-0000-000000000000';
  for (;;) {
    const { rows } = await client.query('SELECT user_id, embedding FROM canonical_embeddings WHERE user_id > $1 ORDER BY user_id LIMIT 5000', [after]);
    for (const r of rows) {
      data.set(decodeEmbedding(r.embedding), ids.length * DIM);
      ids.push(r.user_id);
    }
    if (rows.length < 5000) break;
    after = rows[rows.length - 1].user_id;
  }
  await client.end();
  const buildMs = performance.now() - t0;
  const memory = settledRss() - rss0;
  const n = ids.length;
  const scan = (q: Float32Array) => {
    // top-K by insertion into a small sorted array
    const bestS: number[] = [];
    const bestI: number[] = [];
    for (let i = 0; i < n; i++) {
      let s = 0;
      const o = i * DIM;
      for (let j = 0; j < DIM; j++) s += q[j]! * data[o + j]!;
      if (bestS.length < K || s > bestS[bestS.length - 1]!) {
        let p = bestS.length < K ? bestS.length : K - 1;
        while (p > 0 && bestS[p - 1]! < s) p--;
        bestS.splice(p, 0, s);
        bestI.splice(p, 0, i);
        if (bestS.length > K) {
          bestS.pop();
          bestI.pop();
        }
      }
    }
    return bestI.map((i) => ids[i]!);
  };
  const queried = queriedIdentities(args.size, args.single);
  const lat: number[] = [];
  const top: string[][] = [];
  for (const i of queried) {
    const q = probeVector(i);
    const t = performance.now();
    top.push(scan(q));
    lat.push(performance.now() - t);
  }
  return {
    buildMs,
    trainMs: 0,
    memoryBytes: memory,
    indexBytes: data.byteLength,
    rebuildMs: null,
    queried,
    variants: [{ nprobe: null, single: summarise(lat), batched: null, knn: null, knnMateAt1: null, top, mateAt1: mateAt1(queried, top) }],
    effectiveFactory: 'js exact scan',
    size: n,
  };
}

async function faissIndex(args: Args) {
  const db = createDb(args.db, 2, { bindModels: false });
  const replica = new IndexReplica(db, { factory: args.factory, nprobe: args.nprobes[0] ?? 32, syncIntervalMs: 0, logger: createLogger({ level: 'silent' }), pageSize: 5000 });
  const rss0 = settledRss();
  const t0 = performance.now();
  await replica.start();
  const buildMs = performance.now() - t0;
  const memory = settledRss() - rss0;
  const trainMs = replica.stats.lastBuild?.trainMs ?? 0;
  const index = replica.index;
  const indexBytes = index.serialisedBytes();

  const queried = queriedIdentities(args.size, args.single);
  const probes = queried.map((i) => probeVector(i));
  const bq = queriedIdentities(args.size, args.batched).map((i) => probeVector(i));
  const variants = [];
  // IVF types: the same index measured at each nprobe (set through the serialised index).
  for (const nprobe of index.nprobe === null ? [null] : args.nprobes) {
    if (nprobe !== null) index.retune(nprobe);
    index.search(probes[0]!, K); // warm
    const lat: number[] = [];
    const top: string[][] = [];
    for (const q of probes) {
      const t = performance.now();
      const hits = index.search(q, K);
      lat.push(performance.now() - t);
      top.push(hits.map((h) => h.userId));
    }
    // Batched: FAISS gets `batch` queries per call; the figure is the per-query share of each call.
    const perQuery: number[] = [];
    for (let i = 0; i < bq.length; i += args.batch) {
      const chunk = bq.slice(i, i + args.batch);
      const t = performance.now();
      index.searchMany(chunk, K);
      perQuery.push((performance.now() - t) / chunk.length);
    }
    // The search job's own path: minSeq check, index search, and (approximate types) exact
    // re-scoring of 4k candidates from PostgreSQL; k = 5 as /identify asks.
    const knnLat: number[] = [];
    let knnMate = 0;
    for (const [j, q] of probes.slice(0, args.knn).entries()) {
      const t = performance.now();
      const r = await replica.knn(Array.from(q), 5, '0');
      knnLat.push(performance.now() - t);
      if (r.hits[0]?.userId === syntheticUserId(queried[j]!)) knnMate++;
    }
    variants.push({
      nprobe,
      single: summarise(lat),
      batched: summarise(perQuery),
      knn: summarise(knnLat),
      knnMateAt1: knnMate / Math.max(1, Math.min(args.knn, probes.length)),
      top,
      mateAt1: mateAt1(queried, top),
    });
  }

  let rebuildMs: number | null = null;
  if (args.rebuild) {
    const t = performance.now();
    await replica.rebuild('bench');
    rebuildMs = performance.now() - t;
  }
  const out = {
    buildMs,
    trainMs,
    memoryBytes: memory,
    indexBytes,
    rebuildMs,
    queried,
    variants,
    effectiveFactory: index.effectiveFactory,
    size: index.size,
  };
  await replica.stop();
  await db.destroy();
  return out;
}

/** mate@1: the genuine pair's enrolled vector is the first answer. */
function mateAt1(queried: number[], top: string[][]): number {
  return queried.filter((i, j) => top[j]![0] === syntheticUserId(i)).length / queried.length;
}

/** RSS after a full garbage collection (the child runs with --expose-gc). */
function settledRss(): number {
  (globalThis as { gc?: () => void }).gc?.();
  (globalThis as { gc?: () => void }).gc?.();
  return process.memoryUsage().rss;
}

const args = parseArgs();
const result = args.factory === 'js' ? await jsBaseline(args) : await faissIndex(args);
process.stdout.write(`${JSON.stringify(result)}\n`);
