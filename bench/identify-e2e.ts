/**
 * End-to-end identify throughput against the raw engine, in the same run on the same photos.
 *
 *   npm run bench -- identify-e2e
 *   BENCH_E2E_SECONDS=60 BENCH_E2E_ENROLLED=100000 FACE_WORKER_CONCURRENCY=2 npm run bench -- identify-e2e
 *   BENCH_PROFILE_DIR=/tmp/prof npm run bench -- identify-e2e   # V8 CPU profiles of web, face, search
 *
 * System: the three processes of production — `web`, `face` and `search`
 * (processes/web.ts, face.ts, search.ts) — against a scratch database `faceid_bench_e2e` holding BENCH_E2E_ENROLLED
 * synthetic canonical embeddings plus the enrolled fixture people. This process is only the client:
 * POST /identify (multipart, `attestation=true`, an operator's token) with enough requests in flight
 * to keep the face worker busy; each request runs normalise, the liveness job, the embed job, the
 * minSeq read, the search job and the SearchLog insert.
 *
 * Raw engine: FaceEngine in a fresh process of its own (bench/raw-engine-child.ts, as the face worker
 * runs), normalise + liveness + embed on the same photos, with as many images in flight as the face
 * worker runs jobs (FACE_WORKER_CONCURRENCY), for half the time before and half after the system (the
 * workers idle meanwhile); the mean is reported.
 *
 * Capacity: CPU time, not wall time, decides how many identifies a machine can serve. The system's
 * CPU per request is summed over the web, face and search processes, the PostgreSQL backends of the
 * scratch database and the Redis server (from /proc and INFO cpu; Linux), not this client; the raw
 * engine's over its process. raw CPU per image / system CPU per request is the share of the
 * engine's capacity the system keeps (goal: at least 70 %, i.e. the system costs at most 30 %). The
 * wall-clock ratio is printed too.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import pg from 'pg';
import { closeDeps, createDeps, type AppDeps } from '../processes/web/deps.js';
import { upsertCanonical } from '../features/face/embeddings-repository.js';
import { freePort } from '../scripts/lib/private-services.js';
import { loadConfig } from '../processes/config.js';
import { createDb, migrateLatest } from '../platform/database/db.js';
import { FACE_ENGINE_VERSION } from '../platform/face/face-models.js';
import { createLogger } from '../platform/logger.js';
import { createRedis } from '../platform/redis/redis.js';
import { ROOT, closedLoop, enrolledVector, fmt, machine, saveResults, summarise, syntheticUserId, table } from './lib.js';
import { fixturePhotos } from './stages.js';
import { processKeyRing } from '../platform/keys/templates.js';

const ring = processKeyRing();

const SECONDS = Number(process.env.BENCH_E2E_SECONDS ?? 30);
const ENROLLED = Number(process.env.BENCH_E2E_ENROLLED ?? 10_000);
const FACE_CONCURRENCY = Number(process.env.FACE_WORKER_CONCURRENCY ?? 1);
const IN_FLIGHT = Number(process.env.BENCH_E2E_IN_FLIGHT ?? 2 * FACE_CONCURRENCY + 2);
const BASE = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
const REDIS_URL = process.env.REDIS_URL ?? 'redis://127.0.0.1:6379';
const DB_NAME = 'faceid_bench_e2e';

export function dbUrl(name: string): string {
  const u = new URL(BASE);
  u.pathname = `/${name}`;
  return u.toString();
}

export async function adminQuery(sql: string): Promise<void> {
  const c = new pg.Client({ connectionString: dbUrl('postgres') });
  await c.connect();
  try {
    await c.query(sql);
  } finally {
    await c.end();
  }
}

export async function waitHealthy(url: string, ms = 60_000): Promise<void> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    try {
      const r = await fetch(url, { signal: AbortSignal.timeout(1000) });
      if (r.ok) return;
    } catch {
      // not up yet
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  throw new Error(`${url} did not become healthy`);
}

/** BENCH_PROFILE_DIR=<dir>: the web and worker processes write V8 CPU profiles there. */
export function startProcess(script: string, env: Record<string, string>): ChildProcess {
  const profile = process.env.BENCH_PROFILE_DIR ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_PROFILE_DIR}`] : [];
  return spawn(process.execPath, [...profile, '--import', 'tsx', path.join(ROOT, script)], {
    cwd: ROOT,
    env: { ...process.env, ...env },
    stdio: ['ignore', 'ignore', 'inherit'],
  });
}

export async function stopProcess(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null) return;
  await new Promise<void>((resolve) => {
    child.once('exit', () => resolve());
    child.kill('SIGTERM');
    setTimeout(() => child.kill('SIGKILL'), 10_000).unref();
  });
}

const CLK_TCK = 100; // Linux USER_HZ

/** CPU seconds (user + system) a process has used so far, from /proc; null where unreadable. */
export function procCpuSeconds(pid: number): number | null {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[11]) + Number(fields[12])) / CLK_TCK;
  } catch {
    return null;
  }
}

/**
 * CPU used by everything serving the system path: the web and worker processes, the PostgreSQL
 * backends connected to the scratch database (this client's own excluded), and the Redis server
 * (shared: anything else using it counts too).
 */
async function systemCpu(deps: AppDeps, children: Record<string, ChildProcess>): Promise<{ total: number; parts: Record<string, number> }> {
  const parts: Record<string, number> = {};
  for (const [name, c] of Object.entries(children)) parts[name] = procCpuSeconds(c.pid!) ?? 0;
  const { rows } = await deps.db.raw('SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()');
  parts.postgres = (rows as { pid: number }[]).reduce((a, r) => a + (procCpuSeconds(r.pid) ?? 0), 0);
  const info = await deps.redis.info('cpu');
  parts.redis = Number(/used_cpu_user:([\d.]+)/.exec(info)?.[1] ?? 0) + Number(/used_cpu_sys:([\d.]+)/.exec(info)?.[1] ?? 0);
  return { total: Object.values(parts).reduce((a, b) => a + b, 0), parts };
}

function cpuDelta(a: { parts: Record<string, number> }, b: { parts: Record<string, number> }): Record<string, number> {
  return Object.fromEntries(Object.keys(b.parts).map((k) => [k, b.parts[k]! - (a.parts[k] ?? 0)]));
}

/** One POST /identify, as an operator's client sends it. */
async function identifyOnce(webUrl: string, token: string, photo: Buffer): Promise<string> {
  const form = new FormData();
  form.append('attestation', 'true');
  form.append('file', new Blob([new Uint8Array(photo)], { type: 'application/octet-stream' }), 'probe');
  const res = await fetch(`${webUrl}/identify`, { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: form });
  const body = (await res.json()) as { outcome?: string; error?: string };
  if (res.status !== 200) throw new Error(`POST /identify answered ${res.status} ${body.error ?? ''}`);
  return body.outcome!;
}

export async function runIdentifyE2eBench(): Promise<string> {
  console.log(
    `identify-e2e bench on ${machine()}: ${SECONDS} s each, ${ENROLLED} synthetic enrolled, face worker concurrency ${FACE_CONCURRENCY}, ${IN_FLIGHT} requests in flight`,
  );
  await adminQuery(`DROP DATABASE IF EXISTS "${DB_NAME}" WITH (FORCE)`);
  await adminQuery(`CREATE DATABASE "${DB_NAME}"`);
  const migrator = createDb(dbUrl(DB_NAME), 1, { bindModels: false });
  await migrateLatest(migrator);
  // Synthetic enrolled population (straight into the table; see bench/search.ts).
  const c = new pg.Client({ connectionString: dbUrl(DB_NAME) });
  await c.connect();
  await c.query("INSERT INTO users (id, phone) SELECT md5(i::text)::uuid, '+1' || i FROM generate_series(0, $1::int - 1) i", [ENROLLED]);
  for (let start = 0; start < ENROLLED; start += 1000) {
    const params: unknown[] = [];
    const values: string[] = [];
    for (let i = start; i < Math.min(ENROLLED, start + 1000); i++) {
      const uid = syntheticUserId(i);
      params.push(uid, ring.seal('templates', Buffer.from(enrolledVector(i).buffer), uid)); // sealed as the API seals it
      values.push(`($${params.length - 1}, $${params.length}, '${ring.activeKeyId}', 'link_nin', '${FACE_ENGINE_VERSION}')`);
    }
    await c.query(`INSERT INTO canonical_embeddings (user_id, embedding, key_id, source, engine_version) VALUES ${values.join(',')}`, params);
  }
  await c.end();
  await migrator.destroy();

  const [webPort, facePort, searchPort] = await Promise.all([freePort(), freePort(), freePort()]);
  const env: Record<string, string> = {
    NODE_ENV: 'development',
    DATABASE_URL: dbUrl(DB_NAME),
    REDIS_URL,
    REDIS_PREFIX: `bench_e2e_${randomBytes(3).toString('hex')}`,
    PORT: String(webPort),
    FACE_ENGINE_PORT: String(facePort),
    SEARCH_HEALTH_PORT: String(searchPort),
    FACE_WORKER_CONCURRENCY: String(FACE_CONCURRENCY),
    LOG_LEVEL: 'warn',
    ADMIN_IDENTIFIER: '',
    ADMIN_PASSWORD: '',
  };
  const config = loadConfig({ ...process.env, ...env });
  const webUrl = `http://127.0.0.1:${webPort}`;
  const children = {
    web: startProcess('processes/web.ts', env),
    face: startProcess('processes/face.ts', env),
    search: startProcess('processes/search.ts', env),
  };
  // This process's own deps: enrolment and the operator's token only (idle while measuring).
  const deps = createDeps(config, { logger: createLogger({ level: 'warn', name: 'bench-client' }) });
  try {
    await Promise.all([
      waitHealthy(`${config.face.engineUrl}/health`),
      waitHealthy(`${config.search.healthUrl}/health`),
      waitHealthy(`${webUrl}/openapi.json`),
    ]);
    const [op] = await deps
      .db('operators')
      .insert({
        identifier: `bench-${Date.now()}`,
        displayName: 'Bench operator',
        role: 'operator',
        mustResetPassword: false,
        passwordHash: 'not-a-login-account',
      })
      .returning('id');
    const [session] = await deps.db('sessions').insert({ subjectType: 'operator', subjectId: op.id }).returning('id');
    const { token } = await deps.tokens.signAccess({ sub: op.id, aud: 'operator', sid: session.id });
    const photos = fixturePhotos().filter((p) => !p.kind.startsWith('no face'));
    // Enrol the people of the photos, so that identify finds matches as well as misses.
    for (const file of ['lfw/Bush_2.png', 'lfw/Powell_2.png', 'grace_hopper_a.jpg', 'astronaut.png']) {
      const a = await deps.face.analyseCapture(photos.find((p) => p.file === file)!.data, 'single');
      if (a.outcome !== 'ok') throw new Error(`${file}: ${a.outcome}`);
      const e = await deps.face.embedCapture(a);
      const [u] = await deps
        .db('users')
        .insert({ phone: `+2${file.length}${Date.now() % 1e6}` })
        .returning('id');
      await upsertCanonical(deps.db, u.id, e.embedding, 'link_nin', e.engineVersion);
    }
    const data = photos.map((p) => p.data);
    // Warm both paths.
    for (const p of data) await identifyOnce(webUrl, token, p);

    // The raw engine before and after the system (bracketing drifts of the machine), each time in a
    // fresh process of its own, while the workers are idle; its figures are the mean of the two runs.
    const rawRun = () => {
      const args = { seconds: SECONDS / 2, inFlight: FACE_CONCURRENCY, threads: config.face.intraOpThreads };
      const r = spawnSync(process.execPath, ['--import', 'tsx', path.join(ROOT, 'bench/raw-engine-child.ts'), JSON.stringify(args)], {
        cwd: ROOT,
        encoding: 'utf8',
        maxBuffer: 64 * 1024 * 1024,
        env: { ...process.env, FACE_MODELS_DIR: path.resolve(ROOT, config.face.modelsDir) },
      });
      if (r.status !== 0) throw new Error(`raw-engine-child failed: ${r.stderr}`);
      return JSON.parse(r.stdout.trim().split('\n').pop()!) as { done: number; perSecond: number; cpuMs: number; samples: number[] };
    };
    const rawBefore = await rawRun();

    const outcomes: Record<string, number> = {};
    const cpu0 = await systemCpu(deps, children);
    const system = await closedLoop(IN_FLIGHT, SECONDS, data, async (p) => {
      const o = await identifyOnce(webUrl, token, p);
      outcomes[o] = (outcomes[o] ?? 0) + 1;
    });
    const cpu1 = await systemCpu(deps, children);
    const systemLatency = summarise(system.samples);
    const systemCpuParts = cpuDelta(cpu0, cpu1);
    const systemCpuMs = (1000 * (cpu1.total - cpu0.total)) / system.done;
    const logged = Number((await deps.db('searchLogs').count({ n: '*' }).first())?.n ?? 0);

    const rawAfter = await rawRun();
    const raw = {
      done: rawBefore.done + rawAfter.done,
      perSecond: (rawBefore.perSecond + rawAfter.perSecond) / 2,
      latency: summarise([...rawBefore.samples, ...rawAfter.samples]),
    };
    const rawCpuMs = (rawBefore.cpuMs + rawAfter.cpuMs) / 2;

    const wallRatio = system.perSecond / raw.perSecond;
    const cpuRatio = rawCpuMs / systemCpuMs;
    const parts = Object.entries(systemCpuParts)
      .map(([k, v]) => `${k} ${fmt((1000 * v) / system.done, 1)}`)
      .join(', ');
    const md = [
      table(
        ['path', 'in flight', 'per second (wall)', 'latency ms p50 / p99', 'CPU ms per request', 'requests'],
        [
          [
            'POST /identify (HTTP, queues, search, SearchLog)',
            String(IN_FLIGHT),
            fmt(system.perSecond, 2),
            `${fmt(systemLatency.p50)} / ${fmt(systemLatency.p99)}`,
            fmt(systemCpuMs, 1),
            String(system.done),
          ],
          [
            'raw FaceEngine (normalise + liveness + embed)',
            String(FACE_CONCURRENCY),
            fmt(raw.perSecond, 2),
            `${fmt(raw.latency.p50)} / ${fmt(raw.latency.p99)}`,
            fmt(rawCpuMs, 1),
            String(raw.done),
          ],
        ],
      ),
      '',
      `**Capacity kept: raw CPU per image / system CPU per identify = ${fmt(100 * cpuRatio, 1)} %** (the system costs ${fmt(100 * (1 - cpuRatio), 1)} % ` +
        `of the raw engine's capacity; goal: at most 30 %). Wall-clock throughput ratio system / raw: ${fmt(100 * wallRatio, 1)} % ` +
        `(the system spreads one request over several processes, so on 2 cores it can exceed 100 %).`,
      '',
      `System CPU ms per request by process: ${parts}. Face worker concurrency ${FACE_CONCURRENCY}, ` +
        `${ENROLLED.toLocaleString('en')} synthetic + 4 real enrolled (\`${config.search.indexFactory}\`), system ${SECONDS} s, raw ${SECONDS / 2} s before and after ` +
        `(CPU ms per image ${fmt(rawBefore.cpuMs, 1)} and ${fmt(rawAfter.cpuMs, 1)}). ` +
        `Outcomes: ${Object.entries(outcomes)
          .map(([k, v]) => `${k} ${v}`)
          .join(', ')}; SearchLog rows ${logged}.`,
    ].join('\n');
    saveResults('identify-e2e', {
      seconds: SECONDS,
      enrolled: ENROLLED,
      faceConcurrency: FACE_CONCURRENCY,
      inFlight: IN_FLIGHT,
      system: { done: system.done, perSecond: system.perSecond, latency: systemLatency },
      raw,
      rawRuns: [rawBefore, rawAfter].map((r) => ({ done: r.done, perSecond: r.perSecond, cpuMsPerImage: r.cpuMs })),
      systemCpuMsPerRequest: systemCpuMs,
      systemCpuMsByProcess: Object.fromEntries(Object.entries(systemCpuParts).map(([k, v]) => [k, (1000 * v) / system.done])),
      rawCpuMsPerImage: rawCpuMs,
      cpuRatio,
      wallRatio,
      outcomes,
      logged,
    });
    console.log(`\n${md}`);
    return md;
  } finally {
    await closeDeps(deps);
    await Promise.all(Object.values(children).map(stopProcess));
    const r = createRedis(REDIS_URL);
    const keys = await r.keys(`${env.REDIS_PREFIX}:*`).catch(() => [] as string[]);
    if (keys.length) await r.del(...keys);
    r.disconnect();
    if (!process.env.BENCH_KEEP_DB) await adminQuery(`DROP DATABASE IF EXISTS "${DB_NAME}" WITH (FORCE)`);
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await runIdentifyE2eBench();
