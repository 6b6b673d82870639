/**
 * 1:N search benchmark (docs/performance.md section 2, docs/vector-index.md).
 *
 *   npm run bench -- search                          # both synthetic generators at 1M (about 15 min)
 *   npm run bench -- search --dataset DIR            # your own embeddings (format: bench/search-data.ts)
 *   BENCH_N=100000 npm run bench -- search           # a quicker run
 *   BENCH_N=10000000 BENCH_SOURCE=file BENCH_GENERATORS=clustered npm run bench -- search   # the bounded 10M run
 *
 * Options: BENCH_N (gallery size of the generated datasets, default 1,000,000; a comma list such as
 * 10000000,1000000 runs each size in turn, so that their ratios share one run's load), BENCH_PROBES (genuine
 * probes, default 1000), BENCH_EXACT_PROBES (probes also searched exactly, default 1000; the exact
 * scan costs about 0.1 s per probe per million rows), BENCH_GENERATORS (uniform,clustered),
 * BENCH_FACTORY (default: VECTOR_INDEX_FACTORY's default, BinarySketch512), BENCH_CANDIDATES
 * (SEARCH_RERANK_CANDIDATES), BENCH_EXACT_CANDIDATES (SEARCH_EXACT_CANDIDATES), BENCH_SOURCE (postgres | file), BENCH_WORK_DIR (datasets and snapshots;
 * default var/bench/search-work), BENCH_KEEP=1 (keep the scratch database and files), BENCH_COLD_CACHE=1
 * (every cold start from a cold page cache: the snapshot's files dropped from it first), BENCH_CLEAR=0
 * (no clear copy of the rows and no clear cold starts: at 10M, 20 GB less to write), BENCH_CHECK_BEFORE=1
 * (also a cold start with every sealed row authenticated before serving, SEARCH_SNAPSHOT_CHECK=before-serving).
 *
 * Path: the gallery is inserted into `canonical_embeddings` of a scratch database (`faceid_bench`,
 * created with the real migrations, dropped afterwards) as float32 LE bytea, user id = md5(row), in
 * 1000-row statements over two connections. A child process starts a search replica on it (a full
 * build, which writes a snapshot), searches every probe through the search job's own path, measures
 * 8 concurrent searches against 8 sequential ones, runs the exact reference and writes a clear copy of
 * the snapshot's rows; then fresh children start replicas from the snapshot (the cold start) and search
 * every probe again, alternately re-ranking from the snapshot's sealed rows (what a replica does) and
 * from the clear copy (the reference), and report their resident memory split into anonymous and
 * file-backed (/proc/self/status RssAnon / RssFile). BENCH_ROUNDS (default 3) rounds of each. With BENCH_SOURCE=file the rows come from the dataset
 * file instead of PostgreSQL (bench/search-file-source.ts: the bounded procedure for 10M).
 *
 * The LAST line printed is one JSON object: { n, factory, p50Ms, p99Ms, mateAt1, mateAt1Exact,
 * recallVsExact, indexMiB, coldStartS, batchedSpeedup, sealedOverClearP50, sealedAnonMiB } (with both generators: the worse of the two for
 * each figure, and each generator's own figures under `byDataset`).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, rmSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import pg from 'pg';
import { createDb, migrateLatest } from '../platform/database/db.js';
import { FACE_ENGINE_VERSION } from '../platform/face/face-models.js';
import { config } from '../processes/config.js';
import { generateDataset, openDataset, readGallery, type Generator } from './search-data.js';
import { DIM, ROOT, fmt, machine, saveResults, syntheticUserId, table } from './lib.js';
import { processKeyRing } from '../platform/keys/templates.js';

const ring = processKeyRing();

const env = process.env;
/** Gallery sizes, in the order run (BENCH_N=10000000,1000000: both in one run, for ratios under one load). */
const NS = (env.BENCH_N ?? '1000000').split(',').map((x) => Number(x.trim()));
const PROBES = Number(env.BENCH_PROBES ?? 1000);
const EXACT_PROBES = Number(env.BENCH_EXACT_PROBES ?? 1000);
const GENERATORS = (env.BENCH_GENERATORS ?? 'uniform,clustered')
  .split(',')
  .map((s) => s.trim())
  .filter(Boolean) as Generator[];
const SOURCE = (env.BENCH_SOURCE ?? 'postgres') as 'postgres' | 'file';
const WORK = path.resolve(env.BENCH_WORK_DIR ?? path.join(ROOT, 'var', 'bench', 'search-work'));
const BASE = env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const DB_NAME = 'faceid_bench';
/** Cold starts of each version (sealed, clear), alternated. */
const ROUNDS = Number(env.BENCH_ROUNDS ?? 3);
/** BENCH_COLD_CACHE=1: the snapshot's files dropped from the page cache before every cold start. */
const COLD_CACHE = env.BENCH_COLD_CACHE === '1';
/** BENCH_CLEAR=0: no clear copy of the rows and no clear cold starts (at 10M: 20 GB less to write). */
const CLEAR = env.BENCH_CLEAR !== '0';
/**
 * BENCH_CHECK_BEFORE=1: a third cold start each round, the sealed rows all authenticated before the
 * replica serves (SEARCH_SNAPSHOT_CHECK=before-serving) against the default, beside it (background).
 */
const CHECK_BEFORE = env.BENCH_CHECK_BEFORE === '1';

/**
 * Drops every file under `dir` from the page cache (GNU dd's `iflag=nocache count=0`: posix_fadvise
 * DONTNEED on the whole file), so that the next start reads the snapshot from disk.
 */
function evictFromPageCache(dir: string): void {
  for (const e of readdirSync(dir, { recursive: true, withFileTypes: true })) {
    if (!e.isFile()) continue;
    const r = spawnSync('dd', [`if=${path.join(e.parentPath, e.name)}`, 'iflag=nocache', 'count=0', 'status=none']);
    if (r.status !== 0) throw new Error(`dd could not drop ${e.name} from the page cache: ${r.stderr}`);
  }
}

function datasetArg(): string | null {
  const i = process.argv.indexOf('--dataset');
  if (i < 0) return null;
  const dir = process.argv[i + 1];
  if (!dir) throw new Error('--dataset needs a directory');
  return path.resolve(dir);
}

export function dbUrl(name: string): string {
  const u = new URL(BASE);
  u.pathname = `/${name}`;
  return u.toString();
}

export async function admin<T>(fn: (c: pg.Client) => Promise<T>): Promise<T> {
  const c = new pg.Client({ connectionString: dbUrl('postgres') });
  await c.connect();
  try {
    return await fn(c);
  } finally {
    await c.end();
  }
}

export async function createScratchDb(name = DB_NAME): Promise<void> {
  await admin(async (c) => {
    await c.query(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    await c.query(`CREATE DATABASE "${name}"`);
  });
  const db = createDb(dbUrl(name), 1, { bindModels: false });
  try {
    await migrateLatest(db);
  } finally {
    await db.destroy();
  }
}

/** The gallery into users + canonical_embeddings (two connections, 1000 rows per statement). */
export async function loadIntoPostgres(dir: string, log: (s: string) => void, name = DB_NAME): Promise<number> {
  const t0 = performance.now();
  const ds = openDataset(dir);
  const clients = [new pg.Client({ connectionString: dbUrl(name) }), new pg.Client({ connectionString: dbUrl(name) })];
  await Promise.all(clients.map((c) => c.connect()));
  try {
    await Promise.all(clients.map((c) => c.query('SET synchronous_commit = off')));
    await clients[0]!.query("INSERT INTO users (id, phone) SELECT md5(i::text)::uuid, '+1' || i FROM generate_series(0, $1::int) i", [ds.n - 1]);
    let turn = 0;
    const inflight: Promise<unknown>[] = [];
    await readGallery(ds, 1000, async (r0, rows) => {
      const params: unknown[] = [];
      const values: string[] = [];
      for (let i = 0; i < rows.length / DIM; i++) {
        const uid = syntheticUserId(r0 + i);
        // Sealed as the API seals it (templates are never stored in clear).
        params.push(uid, ring.seal('templates', Buffer.from(rows.buffer, rows.byteOffset + i * DIM * 4, DIM * 4), uid));
        values.push(`($${params.length - 1}, $${params.length}, '${ring.activeKeyId}', 'link_nin', '${FACE_ENGINE_VERSION}')`);
      }
      const c = clients[turn++ % 2]!;
      inflight.push(c.query(`INSERT INTO canonical_embeddings (user_id, embedding, key_id, source, engine_version) VALUES ${values.join(',')}`, params));
      if (inflight.length >= 2) await inflight.shift();
      if (r0 % 200_000 === 0 && r0) log(`  inserted ${r0.toLocaleString('en')} rows (${fmt((performance.now() - t0) / 1000)} s)`);
    });
    await Promise.all(inflight);
    await clients[0]!.query('ANALYZE canonical_embeddings');
  } finally {
    await Promise.all(clients.map((c) => c.end()));
  }
  return (performance.now() - t0) / 1000;
}

function runChild(args: Record<string, unknown>): any {
  const r = spawnSync(
    process.execPath,
    ['--expose-gc', '--max-old-space-size=8192', '--import', 'tsx', path.join(ROOT, 'bench/search-child.ts'), JSON.stringify(args)],
    {
      cwd: ROOT,
      encoding: 'utf8',
      maxBuffer: 64 * 1024 * 1024,
      // One core: no BLAS or OpenMP helper threads (the issue's figures are per core).
      env: { ...process.env, LOG_LEVEL: 'silent', OPENBLAS_NUM_THREADS: '1', OMP_NUM_THREADS: '1' },
    },
  );
  if (r.status !== 0) throw new Error(`search-child ${String(args.mode)} failed (${r.status ?? r.signal}):\n${r.stderr}`);
  // The figures are the last JSON line; anything else the child printed (a late warning) is shown.
  const lines = r.stdout.trim().split('\n');
  const at = lines.findLastIndex((l) => l.startsWith('{'));
  if (lines.length > 1 || at < 0) process.stderr.write(lines.filter((_, i) => i !== at).join('\n') + '\n');
  if (at < 0) throw new Error(`search-child ${String(args.mode)} printed no figures`);
  return JSON.parse(lines[at]!);
}

interface Figures {
  dataset: string;
  n: number;
  factory: string;
  p50Ms: number;
  p99Ms: number;
  mateAt1: number | null;
  mateAt1Exact: number | null;
  recallVsExact: number | null;
  indexMiB: number;
  coldStartS: number;
  batchedSpeedup: number | null;
  [k: string]: unknown;
}

async function benchDataset(name: string, dir: string, log: (s: string) => void): Promise<Figures> {
  const ds = openDataset(dir);
  const factory = env.BENCH_FACTORY ?? config().search.indexFactory;
  const candidates = Number(env.BENCH_CANDIDATES ?? config().search.rerankCandidates);
  const exactCandidates = Number(env.BENCH_EXACT_CANDIDATES ?? config().search.exactCandidates);
  let loadS: number | null = null;
  // The scratch database exists in both routes: with BENCH_SOURCE=file the rows come from the file, but
  // the replica still reads its erasures (none) and lineage bookkeeping there.
  await createScratchDb();
  if (SOURCE === 'postgres') {
    log(`${name}: inserting ${ds.n.toLocaleString('en')} rows into PostgreSQL`);
    loadS = await loadIntoPostgres(dir, log);
    log(`${name}: inserted in ${fmt(loadS)} s (${fmt(ds.n / loadS, 0)} rows/s)`);
  }
  const snapshotDir = path.join(WORK, `snapshots-${name}`);
  rmSync(snapshotDir, { recursive: true, force: true });
  const common = { source: SOURCE, db: dbUrl(DB_NAME), dataset: dir, factory, candidates, exactCandidates, snapshotDir };
  log(
    `${name}: full build + ${Math.min(PROBES, ds.q)} searches + exact reference (${factory}, ${candidates} Hamming candidates, ${exactCandidates || candidates} re-ranked exactly)`,
  );
  const t1 = performance.now();
  const clearVectorsFile = path.join(WORK, `clear-vectors-${name}.f32`);
  const b = runChild({
    ...common,
    mode: 'build',
    probes: PROBES,
    exactProbes: EXACT_PROBES,
    speedupRounds: 30,
    check: [],
    clearVectorsFile: CLEAR ? clearVectorsFile : undefined,
  });
  log(
    `${name}: done in ${fmt((performance.now() - t1) / 1000)} s; cold starts from the snapshot, ${CLEAR ? 'sealed and clear alternated' : 'sealed only'} (${ROUNDS} rounds)${COLD_CACHE ? ', each from a cold page cache' : ''}`,
  );
  // The same snapshot served twice: re-ranking from its sealed rows (what a replica does), and from a
  // clear copy of the same rows (the reference), each in a fresh process, alternated.
  const runs: Record<'sealed' | 'clear' | 'before', any[]> = { sealed: [], clear: [], before: [] };
  try {
    for (let round = 0; round < ROUNDS; round++) {
      const order = round % 2 ? (['clear', 'before', 'sealed'] as const) : (['sealed', 'before', 'clear'] as const);
      for (const variant of order.filter((v) => (v === 'clear' ? CLEAR : v === 'before' ? CHECK_BEFORE : true))) {
        if (COLD_CACHE) {
          evictFromPageCache(snapshotDir);
          if (variant === 'clear') evictFromPageCache(path.dirname(clearVectorsFile));
        }
        const c = runChild({
          ...common,
          mode: 'cold',
          probes: PROBES,
          exactProbes: 0,
          speedupRounds: 0,
          check: b.check.slice(0, 20),
          exactTop: b.exactTop,
          clearVectorsFile: variant === 'clear' ? clearVectorsFile : undefined,
          snapshotCheck: variant === 'before' ? 'before-serving' : 'background',
        });
        if (c.from !== 'snapshot' || !c.same || c.sealed !== (variant !== 'clear'))
          throw new Error(`the ${variant} cold start did not serve from the snapshot with the same answers: ${JSON.stringify(c)}`);
        runs[variant].push(c);
        log(
          `${name}: ${variant}: p50 ${fmt(c.p50Ms, 2)} ms, p99 ${fmt(c.p99Ms, 2)} ms, CPU p50 ${fmt(c.cpuP50Ms, 2)} ms, recall vs exact ${pct(c.recallVsExact)}, anonymous ${fmt(c.anonMiB, 0)} MiB, file-backed ${fmt(c.fileMiB, 0)} MiB, cold start ${fmt(c.readyMs / 1000, 2)} s${c.rowsCheckedMs != null ? ` (its rows authenticated beside it after ${fmt(c.rowsCheckedMs / 1000, 2)} s; ${c.duringSearches} searches meanwhile, p50 ${fmt(c.duringP50Ms, 2)} ms, p99 ${fmt(c.duringP99Ms, 2)} ms)` : ''}`,
        );
      }
    }
  } finally {
    rmSync(clearVectorsFile, { force: true });
  }
  if (!env.BENCH_KEEP) rmSync(snapshotDir, { recursive: true, force: true });
  const mean = (xs: number[]) => xs.reduce((a, x) => a + x, 0) / xs.length;
  const side = (v: 'sealed' | 'clear' | 'before') => {
    const r = runs[v];
    return {
      p50Ms: mean(r.map((c) => c.p50Ms)),
      p99Ms: mean(r.map((c) => c.p99Ms)),
      cpuP50Ms: mean(r.map((c) => c.cpuP50Ms)),
      cpuP99Ms: mean(r.map((c) => c.cpuP99Ms)),
      recallVsExact: Math.min(...r.map((c) => c.recallVsExact ?? 0)),
      mateAt1: Math.min(...r.map((c) => c.mateAt1 ?? 0)),
      anonMiB: Math.max(...r.map((c) => c.anonMiB)),
      fileMiB: Math.max(...r.map((c) => c.fileMiB)),
      indexMiB: mean(r.map((c) => c.indexMiB)),
      coldStartS: mean(r.map((c) => c.readyMs / 1000)),
      coldStartCpuS: mean(r.map((c) => c.readyCpuMs / 1000)),
      rowsCheckedS: r.some((c) => c.rowsCheckedMs == null) ? null : mean(r.map((c) => c.rowsCheckedMs / 1000)),
      duringP50Ms: r.some((c) => c.duringP50Ms == null) ? null : mean(r.map((c) => c.duringP50Ms)),
      p50sMs: r.map((c) => c.p50Ms),
    };
  };
  const sealed = side('sealed'),
    clear = CLEAR ? side('clear') : null,
    before = CHECK_BEFORE ? side('before') : null;
  const { check: _check, exactTop: _exactTop, ...rest } = b;
  return {
    ...rest,
    dataset: name,
    loadS,
    buildS: b.buildMs / 1000,
    p50Ms: sealed.p50Ms,
    p99Ms: sealed.p99Ms,
    coldStartS: sealed.coldStartS,
    sealed,
    clear,
    before,
    sealedOverClearP50: clear ? sealed.p50Ms / clear.p50Ms : null,
    sealedOverClearCpuP50: clear ? sealed.cpuP50Ms / clear.cpuP50Ms : null,
  };
}

const pct = (x: number | null | undefined) => (x == null ? '–' : `${fmt(100 * x, 1)} %`);

export async function runSearchBench(): Promise<{ markdown: string; lastLine: string }> {
  const t0 = performance.now();
  const log = (s: string) => console.log(s);
  const given = datasetArg();
  console.log(
    `search bench on ${machine()}: ${given ? `dataset ${given}` : `generated ${GENERATORS.join(' + ')} at ${NS.map((n) => n.toLocaleString('en')).join(' and ')}`}, source ${SOURCE}`,
  );
  mkdirSync(WORK, { recursive: true });
  const sets: { name: string; n: number; dir: string; generated: boolean }[] = given
    ? [{ name: path.basename(given), n: 0, dir: given, generated: false }]
    : NS.flatMap((n) => GENERATORS.map((g) => ({ name: `${g}-${n}`, n, dir: path.join(WORK, `${g}-${n}`), generated: true })));
  const figures: Figures[] = [];
  try {
    for (const s of sets) {
      if (s.generated && !existsSync(path.join(s.dir, 'mates.i32'))) {
        const tg = performance.now();
        log(`${s.name}: generating ${s.n.toLocaleString('en')} identities and ${PROBES} probes`);
        generateDataset(s.dir, s.name.split('-')[0] as Generator, s.n, PROBES, log);
        log(`${s.name}: generated in ${fmt((performance.now() - tg) / 1000)} s`);
      }
      const f = await benchDataset(s.name, s.dir, log);
      figures.push(f);
      console.log(JSON.stringify(f));
    }
  } finally {
    if (!env.BENCH_KEEP) await admin((c) => c.query(`DROP DATABASE IF EXISTS "${DB_NAME}" WITH (FORCE)`));
    if (!env.BENCH_KEEP && !given) for (const s of sets) rmSync(s.dir, { recursive: true, force: true });
  }
  const rows = figures.map((f) => [
    f.dataset,
    f.n.toLocaleString('en'),
    `\`${f.factory}\` (${f.candidates as number} / ${(f.exactCandidates as number) || (f.candidates as number)} candidates)`,
    `${fmt(f.p50Ms, 2)} / ${fmt(f.p99Ms, 2)}`,
    `${fmt(f.cpuP50Ms as number, 2)} / ${fmt(f.cpuP99Ms as number, 2)}`,
    pct(f.mateAt1),
    pct(f.mateAt1Exact),
    pct(f.recallVsExact),
    fmt(f.indexMiB, 0),
    fmt(f.rssGrowthMiB as number, 0),
    fmt(f.buildS as number, 1),
    fmt(f.coldStartS, 1),
    `${fmt(f.batchedSpeedup, 2)} (CPU ${fmt(f.batchedSpeedupCpu as number, 2)})`,
  ]);
  const md = table(
    [
      'dataset',
      'n',
      'index',
      'search job ms p50 / p99',
      'CPU ms per search p50 / p99',
      'mate@1',
      'mate@1 exact',
      'recall vs exact',
      'index MiB',
      'RSS growth MiB',
      'full build s',
      'cold start s',
      '8 concurrent vs sequential',
    ],
    rows,
  );
  const worst = <K extends keyof Figures>(k: K, dir: 'max' | 'min') => {
    const v = figures.map((f) => f[k] as number | null).filter((x): x is number => x != null);
    return v.length ? (dir === 'max' ? Math.max(...v) : Math.min(...v)) : null;
  };
  const summary = {
    n: figures[0]?.n ?? 0,
    factory: figures[0]?.factory ?? '',
    p50Ms: worst('p50Ms', 'max'),
    p99Ms: worst('p99Ms', 'max'),
    mateAt1: worst('mateAt1', 'min'),
    mateAt1Exact: worst('mateAt1Exact', 'min'),
    recallVsExact: worst('recallVsExact', 'min'),
    indexMiB: worst('indexMiB', 'max'),
    coldStartS: worst('coldStartS', 'max'),
    batchedSpeedup: worst('batchedSpeedup', 'min'),
    sealedOverClearP50: worst('sealedOverClearP50', 'max'),
    sealedAnonMiB: Math.max(...figures.map((f) => (f.sealed as { anonMiB: number }).anonMiB)),
    byDataset: Object.fromEntries(figures.map((f) => [f.dataset, f])),
  };
  const sideRows = figures.flatMap((f) =>
    (['sealed', 'before', 'clear'] as const).flatMap((v) => {
      const x = f[v] as Record<string, number> | null;
      if (!x) return [];
      return [
        [
          f.dataset,
          f.n.toLocaleString('en'),
          v === 'sealed'
            ? 'sealed rows (mapped, decrypted per re-ranked row), checked beside serving'
            : v === 'before'
              ? 'sealed rows, every row authenticated before serving'
              : 'clear rows (mapped; the reference)',
          `${fmt(x.p50Ms, 2)} / ${fmt(x.p99Ms, 2)}`,
          `${fmt(x.cpuP50Ms, 2)} / ${fmt(x.cpuP99Ms, 2)}`,
          pct(x.recallVsExact),
          fmt(x.anonMiB, 0),
          fmt(x.fileMiB, 0),
          fmt(x.indexMiB, 0),
          x.rowsCheckedS == null
            ? fmt(x.coldStartS, 2)
            : `${fmt(x.coldStartS, 2)} (rows authenticated at ${fmt(x.rowsCheckedS, 1)} s; searches meanwhile p50 ${fmt(x.duringP50Ms, 1)} ms)`,
          v === 'sealed'
            ? f.sealedOverClearP50 == null
              ? '–'
              : `${fmt(f.sealedOverClearP50 as number, 3)} (CPU ${fmt(f.sealedOverClearCpuP50 as number, 3)})`
            : v === 'clear'
              ? '1'
              : '–',
        ],
      ];
    }),
  );
  const sideMd = table(
    [
      'dataset',
      'n',
      'version',
      'search job ms p50 / p99',
      'CPU ms per search p50 / p99',
      'recall vs exact',
      'RssAnon MiB',
      'RssFile MiB',
      'index MiB',
      'cold start s (serving)',
      'p50 / clear p50',
    ],
    sideRows,
  );
  const file = saveResults('search', { figures, summary, totalSeconds: (performance.now() - t0) / 1000 });
  console.log(`\n${sideMd}\n\n${md}\n\nsearch bench: ${fmt((performance.now() - t0) / 1000)} s in all; figures in ${path.relative(ROOT, file)}`);
  return { markdown: `${sideMd}\n\n${md}`, lastLine: JSON.stringify(summary) };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  const r = await runSearchBench();
  console.log(r.lastLine);
  process.exit(0);
}
