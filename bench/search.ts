/**
 * 1:N search benchmark: synthetic 512-d embeddings with genuine pairs, stored in a scratch PostgreSQL
 * database exactly as canonical embeddings are, indexed exactly as a search worker indexes them.
 *
 *   npm run bench -- search                                   # 10k, 100k, 1M (about 15 min on 2 cores)
 *   BENCH_SIZES=10000,100000 npm run bench -- search          # a quicker run
 *   BENCH_FACTORIES='js|Flat|IVF1024,SQ8' BENCH_NPROBES=16,64,256 npm run bench -- search
 *   BENCH_KEEP_DB=1 ...                                       # keep the scratch database afterwards
 *
 * Data: identity i has an enrolled vector (random direction) and a genuine probe at cosine 0.6 with it;
 * independent vectors sit near cosine 0. Rows are inserted straight into `canonical_embeddings` of a
 * scratch database `faceid_bench` (created, migrated, dropped here) — not through embedding-store,
 * which would cost one transaction per row. Sizes grow by inserting the missing identities.
 *
 * For each size and index type a child process (bench/search-child.ts) builds the index from
 * PostgreSQL as a worker does, and measures: build time (with training), RSS growth, single-query
 * and batched (100 per call) latency of the index, the search job's own latency (with exact
 * re-scoring for approximate types), a rebuild (compaction: reuses the trained empty index), mate@1
 * (the genuine pair comes first) and recall@10 against exact search. `js` is a plain JavaScript exact
 * scan over a Float32Array, the baseline.
 */
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { createDb, migrateLatest } from '../shared/db.js';
import { FACE_ENGINE_VERSION } from '../shared/face-models.js';
import os from 'node:os';
import { EMBEDDING_BYTES, encodeEmbedding } from '../shared/embeddings.js';
import { ROOT, enrolledVector, fmt, machine, mib, saveResults, syntheticUserId, table } from './lib.js';

const SIZES = (process.env.BENCH_SIZES ?? '10000,100000,1000000').split(',').map((s) => Number(s.trim())).filter((n) => n > 0).sort((a, b) => a - b);
const FACTORIES = (process.env.BENCH_FACTORIES ?? 'js|Flat|IVF1024,SQ8').split('|').map((s) => s.trim()).filter(Boolean);
const NPROBES = (process.env.BENCH_NPROBES ?? '16,64,256').split(',').map((s) => Number(s.trim())).filter((n) => n > 0);
const BASE = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const DB_NAME = 'faceid_bench';
const LITTLE_ENDIAN = os.endianness() === 'LE'; // float32 LE is the stored format

/** Queries per size: fewer at 1M, where an exact single query costs most of a second. */
function plan(size: number, factory: string) {
  const big = size >= 1_000_000, mid = size >= 100_000;
  if (factory === 'js') return { single: big ? 10 : mid ? 40 : 200 };
  const exact = factory === 'Flat';
  return {
    single: big ? (exact ? 50 : 200) : mid ? 300 : 1000,
    batched: big ? (exact ? 300 : 500) : 2000,
    batch: 100,
    knn: big ? (exact ? 20 : 50) : 100,
    rebuild: true,
  };
}

function dbUrl(name: string): string {
  const u = new URL(BASE);
  u.pathname = `/${name}`;
  return u.toString();
}

async function admin<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: dbUrl('postgres') });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

async function createScratchDb(): Promise<void> {
  await admin(async (c) => {
    await c.query(`DROP DATABASE IF EXISTS "${DB_NAME}" WITH (FORCE)`);
    await c.query(`CREATE DATABASE "${DB_NAME}"`);
  });
  const db = createDb(dbUrl(DB_NAME), 1, { bindModels: false });
  try {
    await migrateLatest(db);
  } finally {
    await db.destroy();
  }
}

/** Inserts identities [from, to): users rows server-side, embeddings from here in 1000-row statements. */
async function insertIdentities(from: number, to: number): Promise<number> {
  const t0 = performance.now();
  const c = new pg.Client({ connectionString: dbUrl(DB_NAME) });
  await c.connect();
  try {
    await c.query("SET synchronous_commit = off");
    await c.query("INSERT INTO users (id, phone) SELECT md5(i::text)::uuid, '+1' || i FROM generate_series($1::int, $2::int) i", [from, to - 1]);
    const rowsPer = 1000;
    const v = new Float32Array(512);
    for (let start = from; start < to; start += rowsPer) {
      const end = Math.min(to, start + rowsPer);
      const params: unknown[] = [];
      const values: string[] = [];
      for (let i = start; i < end; i++) {
        enrolledVector(i, v);
        params.push(syntheticUserId(i), LITTLE_ENDIAN ? Buffer.from(v.buffer.slice(0)) : encodeEmbedding(v));
        values.push(`($${params.length - 1}, $${params.length}, 'link_nin', '${FACE_ENGINE_VERSION}')`);
      }
      await c.query(`INSERT INTO canonical_embeddings (user_id, embedding, source, engine_version) VALUES ${values.join(',')}`, params);
    }
    await c.query('ANALYZE canonical_embeddings');
  } finally {
    await c.end();
  }
  return performance.now() - t0;
}

interface Stats {
  p50: number;
  p99: number;
  n: number;
  mean: number;
}

interface Variant {
  nprobe: number | null;
  single: Stats;
  batched: Stats | null;
  knn: Stats | null;
  knnMateAt1: number | null;
  top: string[][];
  mateAt1: number;
}

interface ChildResult {
  buildMs: number;
  trainMs: number;
  memoryBytes: number;
  indexBytes: number;
  rebuildMs: number | null;
  queried: number[];
  variants: Variant[];
  effectiveFactory: string;
  size: number;
}

function runChild(size: number, factory: string): ChildResult {
  const args = { db: dbUrl(DB_NAME), size, factory, nprobes: NPROBES, ...plan(size, factory) };
  const r = spawnSync(process.execPath, ['--expose-gc', '--import', 'tsx', path.join(ROOT, 'bench/search-child.ts'), JSON.stringify(args)], {
    cwd: ROOT,
    encoding: 'utf8',
    maxBuffer: 256 * 1024 * 1024,
    env: { ...process.env, LOG_LEVEL: 'silent' },
  });
  if (r.status !== 0) throw new Error(`search-child ${factory} @${size} failed (${r.status ?? r.signal}):\n${r.stderr}`);
  const line = r.stdout.trim().split('\n').pop()!;
  return JSON.parse(line) as ChildResult;
}

/** Share of the queries whose exact top-10 neighbours `approx` also returned (neighbour-set overlap). */
function recallAt10(approx: Variant, queriedA: number[], exact: Variant, queriedE: number[]): number {
  const truthById = new Map(queriedE.map((q, j) => [q, exact.top[j]!]));
  let hit = 0, total = 0;
  queriedA.forEach((q, j) => {
    const truth = truthById.get(q);
    if (!truth) return;
    const got = new Set(approx.top[j]);
    for (const id of truth) {
      total++;
      if (got.has(id)) hit++;
    }
  });
  return total ? hit / total : NaN;
}

export async function runSearchBench(): Promise<string> {
  const t0 = performance.now();
  console.log(`search bench on ${machine()}: sizes ${SIZES.join(', ')}; index types ${FACTORIES.join(' | ')}; IVF nprobe ${NPROBES.join(', ')}`);
  await createScratchDb();
  const results: Record<string, unknown>[] = [];
  const sections: string[] = [];
  let have = 0;
  try {
    for (const size of SIZES) {
      const insertMs = await insertIdentities(have, size);
      const insertRate = (size - have) / (insertMs / 1000);
      console.log(`\n== ${size.toLocaleString('en')} embeddings (inserted ${(size - have).toLocaleString('en')} rows in ${fmt(insertMs / 1000)} s, ${fmt(insertRate, 0)} rows/s)`);
      have = size;
      const byFactory = new Map<string, ChildResult>();
      for (const factory of FACTORIES) {
        const t1 = performance.now();
        const r = runChild(size, factory);
        byFactory.set(factory, r);
        console.log(`   ${factory}: done in ${fmt((performance.now() - t1) / 1000)} s (built as ${r.effectiveFactory}, ${r.size} rows, build ${fmt(r.buildMs / 1000)} s)`);
      }
      const exactRun = byFactory.get('Flat') ?? byFactory.get('js');
      const exact = exactRun?.variants[0];
      const rows: (string | number)[][] = [];
      for (const [factory, r] of byFactory) {
        for (const v of r.variants) {
          const isExact = r === exactRun;
          const recall10 = exact && !isExact ? recallAt10(v, r.queried, exact, exactRun!.queried) : 1;
          const row = {
            size, factory, effectiveFactory: r.effectiveFactory, nprobe: v.nprobe, buildS: r.buildMs / 1000, trainS: r.trainMs / 1000,
            rebuildS: r.rebuildMs == null ? null : r.rebuildMs / 1000, memoryMiB: mib(r.memoryBytes), indexMiB: mib(r.indexBytes), bytesPerVector: r.indexBytes / size,
            singleP50: v.single.p50, singleP99: v.single.p99, singleN: v.single.n, batchedP50: v.batched?.p50 ?? null, batchedP99: v.batched?.p99 ?? null,
            jobP50: v.knn?.p50 ?? null, jobP99: v.knn?.p99 ?? null, mateAt1: v.mateAt1, jobMateAt1: v.knnMateAt1,
            trueMatchRecall: exact ? v.mateAt1 / exact.mateAt1 : NaN, recallAt10: recall10,
          };
          results.push(row);
          rows.push([
            factory === 'js' ? 'JS exact scan' : `\`${factory}\`${r.effectiveFactory !== factory ? ` (as ${r.effectiveFactory})` : ''}${v.nprobe ? `, nprobe ${v.nprobe}` : ''}`,
            `${fmt(row.singleP50, 2)} / ${fmt(row.singleP99, 2)} (n=${v.single.n})`,
            row.batchedP50 == null ? '–' : `${fmt(row.batchedP50, 2)} / ${fmt(row.batchedP99, 2)}`,
            row.jobP50 == null ? '–' : `${fmt(row.jobP50, 2)} / ${fmt(row.jobP99, 2)}`,
            `${fmt(row.buildS)}${row.trainS ? ` (train ${fmt(row.trainS)})` : ''}`,
            row.rebuildS == null ? '–' : fmt(row.rebuildS),
            `${fmt(row.indexMiB, 0)} (${fmt(row.bytesPerVector, 0)} B/vec) / ${fmt(row.memoryMiB, 0)}`,
            `${fmt(100 * row.mateAt1, 1)} %${row.jobMateAt1 != null && row.jobMateAt1 !== row.mateAt1 ? ` (job ${fmt(100 * row.jobMateAt1, 1)} %)` : ''}`,
            `${fmt(100 * row.trueMatchRecall, 1)} %`,
            `${fmt(100 * recall10, 1)} %`,
          ]);
        }
      }
      const section = `### ${size.toLocaleString('en')} embeddings\n\n${table(
        ['index', 'single query ms p50 / p99', 'batched (100/call) ms per query p50 / p99', 'search job ms p50 / p99', 'build from PostgreSQL s', 'rebuild s', 'memory MiB: index / process RSS growth', 'genuine pair first (mate@1)', 'true-match recall vs exact', 'top-10 overlap with exact'],
        rows,
      )}\n\nInserting ${size.toLocaleString('en')} rows (cumulative) into PostgreSQL: last step ${fmt(insertRate, 0)} rows/s; stored embedding ${EMBEDDING_BYTES} B/row.`;
      sections.push(section);
      console.log(`\n${section}`);
    }
  } finally {
    if (!process.env.BENCH_KEEP_DB) await admin((c) => c.query(`DROP DATABASE IF EXISTS "${DB_NAME}" WITH (FORCE)`));
  }
  const file = saveResults('search', { sizes: SIZES, factories: FACTORIES, nprobes: NPROBES, results, totalSeconds: (performance.now() - t0) / 1000 });
  console.log(`\nsearch bench: ${fmt((performance.now() - t0) / 1000)} s in all; figures in ${path.relative(ROOT, file)}`);
  return sections.join('\n\n');
}

if (import.meta.url === `file://${process.argv[1]}`) await runSearchBench();
