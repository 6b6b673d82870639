/**
 * The committed architecture's floor against the engine, in one run: what a face request costs the
 * machine when the face work costs nothing, beside what the face work itself costs.
 *
 *   npm run bench -- floor
 *   BENCH_FLOOR_SECONDS=20 BENCH_FLOOR_CALLS=300 npm run bench -- floor
 *
 * 1. The raw engine (bench/face-path-raw-child.ts, as `npm run bench -- face-path` runs it) on the same
 *    photos: one call's wall time, and CPU per image in a closed loop; before and after the floor.
 * 2. The floor (bench/architecture-floor-web.ts, bench/architecture-floor-worker.ts): a Koa process that
 *    authorises by one PostgreSQL read, parses the upload in memory with the service's own multipart
 *    middleware, hands it to a worker as a Redis value beside a BullMQ job, awaits the reply on its reply
 *    list, writes one durable row and answers; FACE_PROCESSES worker processes that take the job and the
 *    value and answer at once (or, for an identify, hand it to one search process by a list, which
 *    answers); a private redis-server (its CPU this run's alone) and a scratch database.
 *    - one client, one call at a time, the single capture's photo: wall ms per call of each route in turn
 *      (`/http`, `/auth`, `/hop` price the steps of `/single`, one hop; `/identify` has two); then BENCH_FLOOR_ROUNDS rounds of the engine (in a process of
 *      its own, bench/face-path-raw-server.ts, as face-path's alternated part) and `/single` in turn;
 *    - BENCH_FLOOR_IN_FLIGHT (4) identifies in flight over the fixture photos: CPU ms per identify in
 *      every process serving it (web, workers, Redis, the database's backends), from /proc.
 * 3. The least ratios the bars of docs/performance.md can have on this machine: (engine + floor) ÷
 *    engine, for the wall of one capture (from the alternated rounds, as face-path measures its ratio)
 *    and for CPU per identify.
 */
import { spawnSync, type ChildProcess } from 'node:child_process';
import { createHash, randomBytes } from 'node:crypto';
import path from 'node:path';
import pg from 'pg';
import sharp from 'sharp';
import { loadConfig } from '../processes/config.js';
import { freePort, startPrivateRedis } from '../scripts/lib/private-services.js';
import { adminQuery, dbUrl, procCpuSeconds, startProcess, stopProcess } from './identify-e2e.js';
import { ROOT, closedLoop, fmt, machine, saveResults, summarise, table } from './lib.js';
import { fixturePhotos } from './stages.js';
import { rawEngine } from './face-path-session.js';

const SECONDS = Number(process.env.BENCH_FLOOR_SECONDS ?? 15);
const CALLS = Number(process.env.BENCH_FLOOR_CALLS ?? 200);
// Rounds of the engine and the floor's one-hop call in turn (as face-path's alternated part).
const ROUNDS = Number(process.env.BENCH_FLOOR_ROUNDS ?? 100);
const IN_FLIGHT = Number(process.env.BENCH_FLOOR_IN_FLIGHT ?? 4);
const DB_NAME = 'faceid_bench_floor';
const TOKEN = 'floor-bench-opaque-token';

interface RawResult {
  one: { wall: number[] };
  loop: { perSecond: number; cpuMs: number };
}

async function post(url: string, photo: Buffer): Promise<number> {
  const form = new FormData();
  form.append('file', new Blob([new Uint8Array(photo)], { type: 'application/octet-stream' }), 'photo');
  const t = performance.now();
  const res = await fetch(url, { method: 'POST', headers: { authorization: `Bearer ${TOKEN}` }, body: form });
  await res.json();
  if (res.status !== 200) throw new Error(`POST ${url} answered ${res.status}`);
  return performance.now() - t;
}

export async function runArchitectureFloorBench(): Promise<string> {
  const config = loadConfig(process.env);
  const faceProcesses = config.face.processes;
  const portrait = await sharp(path.join(ROOT, 'test/fixtures/faces/grace_hopper_b.jpg')).resize(258, 282, { fit: 'cover' }).jpeg({ quality: 90 }).toBuffer();
  const photos = fixturePhotos()
    .filter((p) => !p.kind.startsWith('no face'))
    .map((p) => p.data);

  const rawRun = (): RawResult => {
    const args = {
      seconds: SECONDS / 2,
      threads: config.face.intraOpThreads,
      oneCalls: CALLS / 2,
      onePhotoB64: portrait.toString('base64'),
      photosB64: photos.map((p) => p.toString('base64')),
    };
    const r = spawnSync(process.execPath, ['--import', 'tsx', path.join(ROOT, 'bench/face-path-raw-child.ts')], {
      input: JSON.stringify(args),
      cwd: ROOT,
      encoding: 'utf8',
      maxBuffer: 64 * 1024 * 1024,
      env: { ...process.env, FACE_MODELS_DIR: path.resolve(ROOT, config.face.modelsDir) },
    });
    if (r.status !== 0) throw new Error(`face-path-raw-child failed: ${r.error?.message ?? r.stderr}`);
    return JSON.parse(r.stdout.trim().split('\n').pop()!) as RawResult;
  };

  const rawBefore = rawRun();

  const redis = await startPrivateRedis();
  await adminQuery(`DROP DATABASE IF EXISTS ${DB_NAME} WITH (FORCE)`);
  await adminQuery(`CREATE DATABASE ${DB_NAME}`);
  const databaseUrl = dbUrl(DB_NAME);
  const admin = new pg.Client({ connectionString: databaseUrl });
  await admin.connect();
  await admin.query(`CREATE TABLE floor_sessions (token_hash bytea PRIMARY KEY, user_id uuid NOT NULL, revoked_at timestamptz);
    CREATE TABLE floor_log (id uuid PRIMARY KEY, user_id uuid NOT NULL, outcome text NOT NULL, latency_ms jsonb NOT NULL, created_at timestamptz NOT NULL DEFAULT now())`);
  await admin.query('INSERT INTO floor_sessions (token_hash, user_id) VALUES ($1, gen_random_uuid())', [createHash('sha256').update(TOKEN).digest()]);

  const port = await freePort();
  const env = { FLOOR_PORT: String(port), FLOOR_REDIS_URL: redis.url, FLOOR_DATABASE_URL: databaseUrl, FLOOR_SEAL_KEY: randomBytes(32).toString('hex') };
  const children: Record<string, ChildProcess> = { web: startProcess('bench/architecture-floor-web.ts', env) };
  for (let i = 0; i < faceProcesses; i++) children[`worker ${i + 1}`] = startProcess('bench/architecture-floor-worker.ts', { ...env, FLOOR_ROLE: 'face' });
  children.search = startProcess('bench/architecture-floor-worker.ts', { ...env, FLOOR_ROLE: 'search' });
  const base = `http://127.0.0.1:${port}`;
  try {
    const until = Date.now() + 60_000;
    for (;;) {
      try {
        await post(`${base}/identify`, portrait);
        break;
      } catch (e) {
        if (Date.now() > until) throw e;
        await new Promise((r) => setTimeout(r, 200));
      }
    }
    // The floor's routes in turn, the order rotating each round (a route measured after the others
    // would see a warmer process): each is one step more than the one before.
    const routes = ['/http', '/auth', '/hop', '/single', '/identify'] as const;
    const walls = Object.fromEntries(routes.map((r) => [r, [] as number[]])) as Record<(typeof routes)[number], number[]>;
    for (let i = 0; i < 30; i++) for (const r of routes) await post(`${base}${r}`, portrait);
    for (let i = 0; i < CALLS; i++) {
      for (let j = 0; j < routes.length; j++) {
        const r = routes[(i + j) % routes.length]!;
        walls[r].push(await post(`${base}${r}`, portrait));
      }
    }
    const stepWalls = Object.fromEntries(routes.map((r) => [r, summarise(walls[r]).p50])) as Record<(typeof routes)[number], number>;
    const single = summarise(walls['/single']);
    const identifyOne = summarise(walls['/identify']);

    // The engine and the floor in turn, the order rotating each round: both see the same machine, and
    // each call comes after the other side's (the engine's caches are as cold as a face worker's are).
    const engine = await rawEngine(portrait, path.resolve(ROOT, config.face.modelsDir));
    const alt = { engine: [] as number[], floor: [] as number[] };
    try {
      const sides = [async () => alt.engine.push((await engine.call()).ms), async () => alt.floor.push(await post(`${base}/single`, portrait))];
      for (let i = 0; i < 5; i++) for (const side of sides) await side();
      alt.engine.length = 0;
      alt.floor.length = 0;
      for (let i = 0; i < ROUNDS; i++) for (const side of i % 2 ? [...sides].reverse() : sides) await side();
    } finally {
      engine.stop();
    }
    const altEngine = summarise(alt.engine);
    const altFloor = summarise(alt.floor);

    const cpuNow = async () => {
      const parts: Record<string, number> = {};
      for (const [name, c] of Object.entries(children)) parts[name] = procCpuSeconds(c.pid!) ?? 0;
      parts.redis = procCpuSeconds(redis.pid()!) ?? 0;
      const { rows } = await admin.query('SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()');
      parts.postgres = (rows as { pid: number }[]).reduce((a, r) => a + (procCpuSeconds(r.pid) ?? 0), 0);
      return parts;
    };
    await closedLoop(IN_FLIGHT, 2, photos, (p) => post(`${base}/identify`, p)); // every connection open
    const cpu0 = await cpuNow();
    const load = await closedLoop(IN_FLIGHT, SECONDS, photos, (p) => post(`${base}/identify`, p));
    const cpu1 = await cpuNow();
    const perIdentify = Object.fromEntries(Object.keys(cpu1).map((k) => [k, (1000 * (cpu1[k]! - (cpu0[k] ?? 0))) / load.done]));
    const floorCpu = Object.values(perIdentify).reduce((a, b) => a + b, 0);

    const rawAfter = rawRun();
    const engineOne = summarise([...rawBefore.one.wall, ...rawAfter.one.wall]);
    const engineCpu = (rawBefore.loop.cpuMs + rawAfter.loop.cpuMs) / 2;
    const leastSingle = (altEngine.p50 + altFloor.p50) / altEngine.p50;
    const leastSingleHot = (engineOne.p50 + single.p50) / engineOne.p50;
    const leastCpu = (engineCpu + floorCpu) / engineCpu;

    const md = [
      `Machine: ${machine()}. ${faceProcesses} worker processes, one search process, a private redis-server, load average ${(await import('node:os'))
        .loadavg()
        .map((x) => x.toFixed(2))
        .join(' ')}.`,
      '',
      table(
        ['figure', 'the floor (no face work)', 'the engine (face work only)', 'least ratio of the bar', 'bar'],
        [
          [
            `one capture, the engine and the floor in turn, ${ROUNDS} rounds (wall p50 ms; the floor: POST /single, one hop)`,
            `${fmt(altFloor.p50, 2)} (p99 ${fmt(altFloor.p99, 2)})`,
            `${fmt(altEngine.p50, 1)} (p99 ${fmt(altEngine.p99, 1)})`,
            `${fmt(leastSingle, 3)}×`,
            '≤ 1.2×',
          ],
          [
            `one capture, the floor's routes in turn and the engine's calls back to back (${CALLS} calls)`,
            `${fmt(single.p50, 2)} (p99 ${fmt(single.p99, 2)})`,
            `${fmt(engineOne.p50, 1)} (p99 ${fmt(engineOne.p99, 1)})`,
            `${fmt(leastSingleHot, 3)}×`,
            '',
          ],
          ['an identify, one client (wall p50 ms; two hops)', `${fmt(identifyOne.p50, 2)} (p99 ${fmt(identifyOne.p99, 2)})`, '', '', ''],
          [
            `CPU per identify at ${IN_FLIGHT} in flight (ms, every process)`,
            fmt(floorCpu, 2),
            `${fmt(engineCpu, 1)} (${fmt(rawBefore.loop.cpuMs, 1)}, ${fmt(rawAfter.loop.cpuMs, 1)})`,
            fmt(leastCpu, 3),
            '≤ 1.15',
          ],
        ],
      ),
      '',
      `The floor's steps, one client, the routes in turn (${CALLS} rounds; wall p50 ms, each route one step more than the one before): the upload parsed and answered ${fmt(stepWalls['/http'], 2)}; ` +
        `+ authorised by a PostgreSQL read ${fmt(stepWalls['/auth'] - stepWalls['/http'], 2)}; + the hop to a worker and back ${fmt(stepWalls['/hop'] - stepWalls['/auth'], 2)}; ` +
        `+ the durable row ${fmt(stepWalls['/single'] - stepWalls['/hop'], 2)}; = ${fmt(stepWalls['/single'], 2)}. A second hop (identify): ${fmt(stepWalls['/identify'] - stepWalls['/single'], 2)}.`,
      '',
      table(['floor CPU ms per identify', ...Object.keys(perIdentify), 'all'], [['', ...Object.values(perIdentify).map((v) => fmt(v, 2)), fmt(floorCpu, 2)]]),
      '',
      `The floor at ${IN_FLIGHT} in flight: ${fmt(load.perSecond, 0)} identifies per second (p50 ${fmt(summarise(load.samples).p50, 2)} ms).`,
    ].join('\n');
    saveResults('architecture-floor', {
      stepWalls,
      altEngine,
      altFloor,
      single,
      identifyOne,
      perIdentify,
      floorCpu,
      engineOne,
      engineCpu,
      leastSingle,
      leastSingleHot,
      leastCpu,
      perSecond: load.perSecond,
    });
    return md;
  } finally {
    for (const c of Object.values(children)) await stopProcess(c);
    await admin.end();
    await redis.stop();
    await adminQuery(`DROP DATABASE IF EXISTS ${DB_NAME} WITH (FORCE)`);
  }
}
