/**
 * Search shards beside the single index, in one sitting (docs/performance.md §2 "Shards",
 * docs/vector-index.md "Shards"):
 *
 *   BENCH_SHARDS=4 npm run bench -- search        # this bench (1M clustered, 4 shards)
 *   npm run bench -- search-shards                # the same
 *   BENCH_N=200000 BENCH_PROBES=200 npm run bench -- search-shards   # quicker
 *
 * Real processes: the gallery in a scratch PostgreSQL database (`faceid_bench_shards`, sealed as the API
 * seals it), a private redis-server (so its CPU and command counts are this bench's alone), one
 * `processes/search.ts` holding the whole index (SEARCH_SHARDS=1, the `search` queue) and BENCH_SHARDS
 * more holding one shard each (SEARCH_SHARDS=N, SEARCH_SHARD=i, the broadcast stream), each a full
 * build from PostgreSQL. This process is the web side: the service's own FaceService and JobClient,
 * one with SEARCH_SHARDS=1, one with N. Every probe is searched by both (k = 10, one at a time): the
 * answers compared (users, order, scores), wall time per search, the slowest shard's own search time,
 * Redis commands and CPU per search (INFO commandstats / used_cpu_* before and after each phase), and
 * each process's RssAnon.
 *
 * Every probe's exact top k (every row of the dataset scored) is the reference both lists are held to:
 * how many of each are exact, recall@k, and on how many probes the merged list is below the single
 * index's at some rank.
 *
 * Options: BENCH_N (default 1,000,000), BENCH_PROBES (300), BENCH_SHARDS (4), BENCH_GENERATOR
 * (clustered), BENCH_WORK_DIR, BENCH_KEEP=1 (keep the dataset, the database and the snapshots);
 * SEARCH_RERANK_CANDIDATES / SEARCH_EXACT_CANDIDATES (every search process's, single and shards).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { Redis } from 'ioredis';
import { VectorStore } from '../features/search/worker/search-kernel.js';
import { loadConfig } from '../processes/config.js';
import { createDb } from '../platform/database/db.js';
import { FaceService } from '../features/face/face-service.js';
import { EmbeddingsRepository } from '../features/face/embeddings-repository.js';
import { JobClient } from '../platform/face-path/job-client.js';
import { HandoffSealer } from '../platform/face-path/sealing.js';
import { processKeyRing } from '../platform/keys/templates.js';
import { Metrics } from '../platform/metrics.js';
import { createLogger } from '../platform/logger.js';
import { freePort, startPrivateRedis } from '../scripts/lib/private-services.js';
import { generateDataset, openDataset, type Generator } from './search-data.js';
import { admin, createScratchDb, dbUrl, loadIntoPostgres } from './search.js';
import { DIM, ROOT, fmt, machine, saveResults, summarise, syntheticUserId, table } from './lib.js';

const env = process.env;
const N = Number(env.BENCH_N ?? 1_000_000);
const PROBES = Number(env.BENCH_PROBES ?? 300);
const SHARDS = Number(env.BENCH_SHARDS ?? 4);
const GEN = (env.BENCH_GENERATOR ?? 'clustered') as Generator;
const WORK = path.resolve(env.BENCH_WORK_DIR ?? path.join(ROOT, 'var', 'bench', 'search-work'));
const DB = 'faceid_bench_shards';
const K = 10;

interface Proc {
  name: string;
  child: ChildProcess;
  healthUrl: string;
  startedAt: number;
  readyS?: number;
}

async function startSearchProcess(name: string, extra: Record<string, string>, common: Record<string, string>): Promise<Proc> {
  const port = await freePort();
  const child = spawn(process.execPath, ['--import', 'tsx', 'processes/search.ts'], {
    cwd: ROOT,
    env: { ...process.env, ...common, ...extra, SEARCH_HEALTH_PORT: String(port), OPENBLAS_NUM_THREADS: '1' },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
  return { name, child, healthUrl: `http://127.0.0.1:${port}/health`, startedAt: performance.now() };
}

async function waitReady(p: Proc): Promise<void> {
  for (;;) {
    if (p.child.exitCode !== null) throw new Error(`${p.name} exited (${p.child.exitCode})`);
    try {
      const r = await fetch(p.healthUrl);
      if (r.status === 200) {
        p.readyS = (performance.now() - p.startedAt) / 1000;
        return;
      }
    } catch {
      // not listening yet
    }
    await new Promise((r) => setTimeout(r, 250));
  }
}

const rssAnonMiB = (pid: number | undefined): number => {
  if (!pid) return NaN;
  const m = /RssAnon:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
  return m ? Number(m[1]) / 1024 : NaN;
};

/** Redis's own counters: every command's calls, and its CPU seconds (user + sys, main thread and the rest). */
async function redisCounters(r: Redis): Promise<{ calls: number; cpuS: number; byCommand: Map<string, number> }> {
  const stats = await r.info('commandstats');
  const byCommand = new Map<string, number>();
  let calls = 0;
  for (const m of stats.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) {
    byCommand.set(m[1]!, Number(m[2]));
    calls += Number(m[2]);
  }
  const cpu = await r.info('cpu');
  const f = (k: string) => Number(new RegExp(`^${k}:([0-9.]+)`, 'm').exec(cpu)?.[1] ?? 0);
  return { calls, cpuS: f('used_cpu_user') + f('used_cpu_sys'), byCommand };
}

export async function runSearchShardsBench(): Promise<{ markdown: string; lastLine: string }> {
  const t0 = performance.now();
  const log = (s: string) => console.log(s);
  const load0 = os.loadavg();
  log(
    `search shards bench on ${machine()}: ${GEN} ${N.toLocaleString('en')}, ${SHARDS} shards beside the single index, ${PROBES} probes, load ${load0.map((x) => x.toFixed(2)).join(' ')}`,
  );
  const dir = path.join(WORK, `${GEN}-${N}`);
  const generated = !existsSync(path.join(dir, 'mates.i32'));
  if (generated) {
    mkdirSync(dir, { recursive: true });
    log(`generating ${N.toLocaleString('en')} identities and ${PROBES} probes`);
    generateDataset(dir, GEN, N, PROBES, log);
  }
  const ds = openDataset(dir);
  await createScratchDb(DB);
  const insertS = await loadIntoPostgres(dir, log, DB);
  log(`inserted in ${fmt(insertS)} s`);
  const redis = await startPrivateRedis();
  const snapDir = path.join(WORK, `shards-snapshots-${process.pid}`);
  const common = {
    NODE_ENV: 'development',
    DATABASE_URL: dbUrl(DB),
    REDIS_URL: redis.url,
    REDIS_PREFIX: 'bench',
    SEARCH_SNAPSHOT_DIR: snapDir,
    LOG_LEVEL: 'warn',
    SEARCH_PRUNE_INTERVAL_MS: '0',
    // Candidate counts given to the bench reach every search process and the figures' labels alike.
    ...(env.SEARCH_RERANK_CANDIDATES ? { SEARCH_RERANK_CANDIDATES: env.SEARCH_RERANK_CANDIDATES } : {}),
    ...(env.SEARCH_EXACT_CANDIDATES ? { SEARCH_EXACT_CANDIDATES: env.SEARCH_EXACT_CANDIDATES } : {}),
  };
  const procs: Proc[] = [];
  let jobs: JobClient | undefined;
  const db = createDb(dbUrl(DB), 2, { bindModels: false });
  const r = new Redis(redis.url);
  try {
    // The single index first (alone: its build time is its own), then the shards together.
    const single = await startSearchProcess('single', { SEARCH_SHARDS: '1' }, common);
    procs.push(single);
    await waitReady(single);
    log(`single index ready in ${fmt(single.readyS)} s (full build)`);
    const shardProcs = await Promise.all(
      Array.from({ length: SHARDS }, (_, i) => startSearchProcess(`shard ${i}`, { SEARCH_SHARDS: String(SHARDS), SEARCH_SHARD: String(i) }, common)),
    );
    procs.push(...shardProcs);
    await Promise.all(shardProcs.map(waitReady));
    log(`shards ready in ${shardProcs.map((p) => fmt(p.readyS)).join(', ')} s (full builds, ${SHARDS} at once on ${os.cpus().length} cores)`);

    const cfg = (shards: number) => loadConfig({ ...common, SEARCH_SHARDS: String(shards), FACE_JOB_TIMEOUT_MS: '30000', SEARCH_SHARD_TIMEOUT_MS: '30000' });
    const c1 = cfg(1);
    jobs = new JobClient({ redisUrl: redis.url, redisPrefix: 'bench', timeoutMs: 30_000 });
    const ring = processKeyRing();
    const logger = createLogger({ level: 'silent' });
    const face = (shards: number) =>
      new FaceService({
        config: cfg(shards),
        embeddings: new EmbeddingsRepository(db, ring),
        jobs: jobs!,
        sealer: new HandoffSealer(ring),
        metrics: new Metrics(),
        logger,
      });
    const one = face(1);
    const sharded = face(SHARDS);
    const probe = (i: number) => Array.from(ds.probes.subarray(i * DIM, (i + 1) * DIM));
    // Warm-up (uncounted): first searches map pages and open connections.
    for (let i = 0; i < 10; i++) await Promise.all([one.searchByEmbedding(probe(i), K), sharded.searchByEmbedding(probe(i), K)]);

    // Redis's CPU while nothing is searched (its timers, the blocked reads' time-outs of every process
    // connected): subtracted from each phase at the same rate.
    const idle0 = await redisCounters(r);
    const idleT0 = performance.now();
    await new Promise((res) => setTimeout(res, 3000));
    const idleRate = ((await redisCounters(r)).cpuS - idle0.cpuS) / ((performance.now() - idleT0) / 1000);
    // The change-log position is read once per search by the API, overlapped with the capture's stages
    // (FaceService.identify): read before the clock starts here, so the figures are the search's.
    const minSeq = await new EmbeddingsRepository(db, ring).currentSeq();
    const phase = async (svc: FaceService) => {
      const before = await redisCounters(r);
      const tp = performance.now();
      const wall: number[] = [];
      const stage: number[] = [];
      const answers: { userId: string; score: number }[][] = [];
      for (let i = 0; i < ds.q; i++) {
        const t = performance.now();
        const res = await svc.searchByEmbedding(probe(i), K, undefined, Promise.resolve(minSeq));
        wall.push(performance.now() - t);
        stage.push(res.ms);
        answers.push(res.hits);
      }
      const after = await redisCounters(r);
      const seconds = (performance.now() - tp) / 1000;
      const perCommand: Record<string, number> = {};
      for (const [k, v] of after.byCommand) {
        const d = v - (before.byCommand.get(k) ?? 0);
        if (d > 0) perCommand[k] = Math.round((d / ds.q) * 100) / 100;
      }
      return {
        wall: summarise(wall.sort((a, b) => a - b)),
        stage: summarise(stage.sort((a, b) => a - b)),
        answers,
        // The INFO calls of the measurement itself (2 per phase) are left out.
        commandsPerSearch: (after.calls - before.calls - 2) / ds.q,
        redisCpuUsPerSearch: ((after.cpuS - before.cpuS - idleRate * seconds) * 1e6) / ds.q,
        perCommand,
      };
    };
    log(`searching ${ds.q} probes, single index then ${SHARDS} shards, one at a time`);
    const a = await phase(one);
    const b = await phase(sharded);
    // The exact top K of every probe (every row of the clear dataset scored, natively): the reference
    // both lists are held to.
    const exactStore = new VectorStore(DIM, path.join(dir, 'gallery.f32'), ds.n);
    const exact = exactStore.exactSearch(ds.probes, K);
    exactStore.close();
    const exactIds = (i: number) => Array.from(exact.labels.subarray(i * K, (i + 1) * K), (l) => (l >= 0 ? syntheticUserId(l) : null));
    const ids = (hits: readonly { userId: string }[]) => JSON.stringify(hits.map((x) => x.userId));
    let identical = 0;
    let sameAboveMatch = 0;
    let mateFirstSingle = 0;
    let mateFirstSharded = 0;
    let singleExact = 0;
    let shardedExact = 0;
    let shardedBelowSingle = 0;
    let singleRecall = 0;
    let shardedRecall = 0;
    const threshold = c1.face.identifyMatchThreshold;
    for (let i = 0; i < ds.q; i++) {
      if (JSON.stringify(a.answers[i]) === JSON.stringify(b.answers[i])) identical++;
      const truth = exactIds(i);
      if (ids(a.answers[i]!) === JSON.stringify(truth)) singleExact++;
      if (ids(b.answers[i]!) === JSON.stringify(truth)) shardedExact++;
      const inTruth = new Set(truth);
      singleRecall += a.answers[i]!.filter((x) => inTruth.has(x.userId)).length / K / ds.q;
      shardedRecall += b.answers[i]!.filter((x) => inTruth.has(x.userId)).length / K / ds.q;
      // The sharded list below the single one at some rank: a row the single index found that the
      // shards' candidates missed (never expected: each shard re-ranks at least as many of its rows).
      if (a.answers[i]!.some((x, r) => (b.answers[i]![r]?.score ?? -2) < x.score - 1e-6)) shardedBelowSingle++;
      const cut = (h: { userId: string; score: number }[]) => JSON.stringify(h.filter((x) => x.score >= threshold).slice(0, c1.face.identifyMaxCandidates));
      if (cut(a.answers[i]!) === cut(b.answers[i]!)) sameAboveMatch++;
      const mate = ds.mates[i]!;
      if (mate >= 0 && a.answers[i]![0]?.userId === syntheticUserId(mate)) mateFirstSingle++;
      if (mate >= 0 && b.answers[i]![0]?.userId === syntheticUserId(mate)) mateFirstSharded++;
    }
    const anon = procs.map((p) => ({ name: p.name, rssAnonMiB: Math.round(rssAnonMiB(p.child.pid)) }));
    // Cold starts from the snapshots just written (page cache warm: the files were just written), the
    // single index's and one shard's, each a fresh process alone.
    const coldStart = async (p: Proc, extra: Record<string, string>): Promise<number> => {
      p.child.kill('SIGTERM');
      if (p.child.exitCode === null) await new Promise((res) => p.child.once('exit', res));
      const again = await startSearchProcess(`${p.name} (cold)`, extra, common);
      procs.push(again);
      await waitReady(again);
      return again.readyS!;
    };
    const coldSingleS = await coldStart(single, { SEARCH_SHARDS: '1' });
    const coldShardS = await coldStart(shardProcs[0]!, { SEARCH_SHARDS: String(SHARDS), SEARCH_SHARD: '0' });
    log(`cold start from a snapshot: single index ${fmt(coldSingleS, 2)} s, shard 0 ${fmt(coldShardS, 2)} s`);
    const load1 = os.loadavg();
    const figures = {
      n: ds.n,
      shards: SHARDS,
      probes: ds.q,
      k: K,
      identicalTopK: identical / ds.q,
      identicalTopKCount: identical,
      exactTopK: { single: singleExact, sharded: shardedExact },
      recallAtK: { single: singleRecall, sharded: shardedRecall },
      shardedBelowSingle,
      candidates: { rerank: c1.search.rerankCandidates, exact: c1.search.exactCandidates },
      identicalIdentifyAnswer: sameAboveMatch / ds.q,
      mateAt1Single: mateFirstSingle / ds.q,
      mateAt1Sharded: mateFirstSharded / ds.q,
      singleP50Ms: a.wall.p50,
      singleP99Ms: a.wall.p99,
      singleStageP50Ms: a.stage.p50,
      shardedP50Ms: b.wall.p50,
      shardedP99Ms: b.wall.p99,
      slowestShardStageP50Ms: b.stage.p50,
      shardedOverSlowestShardP50Ms: b.wall.p50 - b.stage.p50,
      redisCommandsPerSearch: { single: a.commandsPerSearch, sharded: b.commandsPerSearch, perShardJobsEstimate: a.commandsPerSearch * SHARDS },
      redisIdleCpuPerSecond: idleRate,
      redisCpuUsPerSearch: { single: a.redisCpuUsPerSearch, sharded: b.redisCpuUsPerSearch, perShardJobsEstimate: a.redisCpuUsPerSearch * SHARDS },
      redisCommandsByName: { single: a.perCommand, sharded: b.perCommand },
      coldStartS: { single: coldSingleS, shard0: coldShardS },
      readyS: Object.fromEntries(procs.map((p) => [p.name, p.readyS])),
      rssAnonMiB: Object.fromEntries(anon.map((x) => [x.name, x.rssAnonMiB])),
      insertS,
      loadAverage: { before: load0, after: load1 },
    };
    const md = [
      table(
        [
          'index',
          'search ms p50 / p99 (web side, wall)',
          "search stage ms p50 (the replica's own; sharded: the slowest shard's)",
          'Redis commands per search',
          'Redis CPU µs per search',
          'RssAnon MiB per process',
          'ready s (full build)',
        ],
        [
          [
            'single index (1 process)',
            `${fmt(a.wall.p50, 2)} / ${fmt(a.wall.p99, 2)}`,
            fmt(a.stage.p50, 2),
            fmt(a.commandsPerSearch, 1),
            fmt(a.redisCpuUsPerSearch, 0),
            String(anon[0]!.rssAnonMiB),
            fmt(single.readyS),
          ],
          [
            `${SHARDS} shards (1 process each)`,
            `${fmt(b.wall.p50, 2)} / ${fmt(b.wall.p99, 2)}`,
            fmt(b.stage.p50, 2),
            fmt(b.commandsPerSearch, 1),
            fmt(b.redisCpuUsPerSearch, 0),
            anon
              .slice(1)
              .map((x) => x.rssAnonMiB)
              .join(' / '),
            shardProcs.map((p) => fmt(p.readyS)).join(' / '),
          ],
          [
            `${SHARDS} per-shard queue jobs (estimate: ${SHARDS} × the single index's job)`,
            '–',
            '–',
            fmt(a.commandsPerSearch * SHARDS, 1),
            fmt(a.redisCpuUsPerSearch * SHARDS, 0),
            '–',
            '–',
          ],
        ],
      ),
      '',
      `Exact top ${K} (every row scored): single index ${singleExact} of ${ds.q} probes, sharded ${shardedExact} of ${ds.q}; recall@${K} single ${fmt(singleRecall, 4)}, sharded ${fmt(shardedRecall, 4)}; sharded below the single index at some rank on ${shardedBelowSingle} (SEARCH_RERANK_CANDIDATES ${c1.search.rerankCandidates}, SEARCH_EXACT_CANDIDATES ${c1.search.exactCandidates}, per replica).`,
      `Answers: top ${K} identical (users, order, scores) on ${identical} of ${ds.q} probes; the identify answer (≥ IDENTIFY_MATCH_THRESHOLD ${threshold}, at most ${c1.face.identifyMaxCandidates}) identical on ${sameAboveMatch} of ${ds.q}; mate first: single ${mateFirstSingle}, sharded ${mateFirstSharded}.`,
      `Cold start from a snapshot (process start → serving, page cache warm): single index ${fmt(coldSingleS, 2)} s, shard 0 ${fmt(coldShardS, 2)} s.`,
      `Sharded p50 − the slowest shard's stage p50: ${fmt(b.wall.p50 - b.stage.p50, 2)} ms (goal ≤ 2 ms). Load average ${load0.map((x) => x.toFixed(2)).join(' ')} before, ${load1.map((x) => x.toFixed(2)).join(' ')} after.`,
      `Redis commands per search by name: single ${JSON.stringify(a.perCommand)}; sharded ${JSON.stringify(b.perCommand)}.`,
    ].join('\n');
    const file = saveResults('search-shards', { figures, totalSeconds: (performance.now() - t0) / 1000 });
    console.log(`\n${md}\n\nsearch shards bench: ${fmt((performance.now() - t0) / 1000)} s in all; figures in ${path.relative(ROOT, file)}`);
    return { markdown: md, lastLine: JSON.stringify({ ...figures, redisCommandsByName: undefined }) };
  } finally {
    await jobs?.close().catch(() => {});
    r.disconnect();
    await db.destroy();
    for (const p of procs) p.child.kill('SIGTERM');
    await Promise.all(procs.map((p) => (p.child.exitCode === null ? new Promise((res) => p.child.once('exit', res)) : null)));
    await redis.stop();
    if (!env.BENCH_KEEP) {
      rmSync(snapDir, { recursive: true, force: true });
      await admin((c) => c.query(`DROP DATABASE IF EXISTS "${DB}" WITH (FORCE)`));
      if (generated) rmSync(dir, { recursive: true, force: true });
    }
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const r = await runSearchShardsBench();
  console.log(r.lastLine);
  process.exit(0);
}
