/**
 * The face path against the raw engine, in one run (the table in docs/performance.md).
 *
 *   npm run bench -- face-path
 *   BENCH_FP_FACE_PROCESSES=1 BENCH_FP_SECONDS=30 npm run bench -- face-path   # default: npm start's FACE_PROCESSES (2)
 *   BENCH_PROFILE_DIR=/tmp/prof npm run bench -- face-path      # V8 CPU profiles of web, face, search
 *
 * 1. The raw engine in a fresh process of its own (bench/face-path-raw-child.ts): the upload as the API
 *    hands it on (a small JPEG checked, any other normalised) +
 *    liveness + embed, the stage calls the face worker makes, on the same photos; before and after the
 *    system (the mean is used, bracketing drifts of a shared machine).
 * 2. The system: the production processes — `web` (api/server.ts), BENCH_FP_FACE_PROCESSES `face`
 *    processes, one `search` — on a private redis-server (so that its CPU and INFO commandstats are
 *    this run's alone) and a scratch database with BENCH_FP_ENROLLED synthetic enrolled users.
 *    - one client, sequential: POST /verify/self and POST /identify on a 258x282 colour portrait
 *      (grace_hopper_b.jpg resized), BENCH_FP_CALLS calls each after warm-up;
 *    - one client, sequential: BENCH_FP_LINKS NIN links as a consumer makes them (validate, verify-face
 *      with a selfie, link; bench/face-path-link.ts), each a first link of a fresh consumer;
 *    - BENCH_FP_IN_FLIGHT (4) POST /identify in flight over the fixture photos with a face for
 *      BENCH_FP_SECONDS: identifies/s, CPU per request per process (web, face, search, the scratch
 *      database's PostgreSQL backends, Redis; from /proc), Redis commands per identify, and the face
 *      workers' own clocks (GET /clocks: wait since the job was created, handler, engine steps).
 * 3. The ratios of the issue's goal table.
 *
 * `latencyMs` of a response: each stage's figure is the time that stage took in the worker (its
 * handler, as the engine measures it); `total` is the request's own wall time in the API.
 */
import { spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import sharp from 'sharp';
import { closeDeps, createDeps } from '../processes/web/deps.js';
import { upsertCanonical } from '../features/face/embeddings-repository.js';
import { loadConfig } from '../processes/config.js';
import { createDb, migrateLatest } from '../platform/database/db.js';
import { FACE_ENGINE_VERSION } from '../platform/face/face-models.js';
import { createLogger } from '../platform/logger.js';
import { freePort, startPrivateRedis } from '../scripts/lib/private-services.js';
import { adminQuery, dbUrl, procCpuSeconds, startProcess, stopProcess, waitHealthy } from './identify-e2e.js';
import { ROOT, closedLoop, enrolledVector, fmt, machine, saveResults, summarise, syntheticUserId, table } from './lib.js';
import { fixturePhotos } from './stages.js';
import { benchLink } from './face-path-link.js';
import { benchAlternated, type AlternatedFigures } from './face-path-session.js';
import { processKeyRing } from '../platform/keys/templates.js';
import { paintLights } from '../test/helpers/screen-light.js';
import { LIGHT_COLOURS } from '../features/liveness/light-response.js';

const ring = processKeyRing();

const SECONDS = Number(process.env.BENCH_FP_SECONDS ?? 20);
// 100 calls: with 40, the p99 was the slowest call itself.
const CALLS = Number(process.env.BENCH_FP_CALLS ?? 100);
const ENROLLED = Number(process.env.BENCH_FP_ENROLLED ?? 1000);
const IN_FLIGHT = Number(process.env.BENCH_FP_IN_FLIGHT ?? 4);
const LINKS = Number(process.env.BENCH_FP_LINKS ?? 40);
// As many face processes as `npm start` runs (FACE_PROCESSES, default 2: one per core).
const FACE_PROCESSES = Number(process.env.BENCH_FP_FACE_PROCESSES ?? loadConfig(process.env).face.processes);
// Its own database name when several copies of the tree bench at once on one PostgreSQL.
const DB_NAME = process.env.BENCH_FP_DB ?? 'faceid_bench_face_path';
// Rounds of the alternated engine / single capture / liveness session part.
const ROUNDS = Number(process.env.BENCH_FP_ROUNDS ?? 40);
// `session`: only the alternated part (the engine, a single capture, a session), for a quick run.
const ONLY = process.env.BENCH_FP_ONLY ?? '';
// The alternated part's sides (comma-separated among engine, single, session, lit; default all): e.g.
// `engine,single` with BENCH_FP_ONLY=session for a quick A/B of a single capture, or a profile of it alone.
const SIDES = process.env.BENCH_FP_SIDES ? (process.env.BENCH_FP_SIDES.split(',') as ('engine' | 'single' | 'session' | 'lit')[]) : undefined;

interface RawResult {
  one: { wall: number[]; steps: Record<string, number>; normalise: number; liveness: number; embed: number };
  perPhoto: number[];
  loop: { done: number; perSecond: number; cpuMs: number };
}

interface Clocks {
  pid: number;
  cpuMs: number;
  [queue: string]: { jobs: number; msByStep: Record<string, number> } | number;
}

function commandStats(info: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) out[m[1]!] = Number(m[2]);
  return out;
}

async function post(
  url: string,
  token: string,
  field: string,
  photo: Buffer,
  extra: Record<string, string> = {},
): Promise<{ outcome: string; latencyMs: Record<string, number | null>; wall: number }> {
  const form = new FormData();
  for (const [k, v] of Object.entries(extra)) form.append(k, v);
  form.append(field, new Blob([new Uint8Array(photo)], { type: 'application/octet-stream' }), 'photo');
  const t = performance.now();
  const res = await fetch(url, { method: 'POST', headers: { authorization: `Bearer ${token}` }, body: form });
  const body = (await res.json()) as { outcome?: string; error?: string; latencyMs: Record<string, number | null> };
  const wall = performance.now() - t;
  if (res.status !== 200) throw new Error(`POST ${url} answered ${res.status} ${body.error ?? ''}`);
  return { outcome: body.outcome!, latencyMs: body.latencyMs, wall };
}

// (A tree without the clocks, e.g. an older commit measured for comparison, gives none.) Tried twice:
// after the raw child's spawnSync has blocked this process for longer than the status port's keep-alive,
// the first fetch goes out on a socket the server closed and fails; a reading that silently came back
// empty made the next delta the clocks since the process started (the one-client row then carried the
// alternated part's captures of another photo).
async function clocksNowOf(facePorts: number[]): Promise<Clocks[]> {
  const read = (p: number) =>
    fetch(`http://127.0.0.1:${p}/clocks`).then(
      (r) => (r.ok ? (r.json() as Promise<Clocks>) : null),
      () => null,
    );
  return Promise.all(facePorts.map(async (p) => (await read(p)) ?? (await read(p)) ?? ({} as Clocks)));
}

/** Per queue: jobs run between two readings of the face workers' clocks, and ms per job by step. */
function clockDeltaOf(before: Clocks[], after: Clocks[]): string[][] {
  const rows: string[][] = [];
  for (const queue of ['liveness', 'embed', 'light']) {
    let jobs = 0;
    const steps: Record<string, number> = {};
    after.forEach((c1, i) => {
      const q1 = c1[queue] as Clocks[string] | undefined;
      if (!q1 || typeof q1 === 'number') return;
      const q0 = before[i]![queue] as Clocks[string] | undefined;
      const base = q0 && typeof q0 !== 'number' ? q0 : { jobs: 0, msByStep: {} as Record<string, number> };
      jobs += q1.jobs - base.jobs;
      for (const [k, v] of Object.entries(q1.msByStep)) steps[k] = (steps[k] ?? 0) + v - (base.msByStep[k] ?? 0);
    });
    if (jobs > 0)
      rows.push([
        queue,
        String(jobs),
        Object.entries(steps)
          .map(([k, v]) => `${k} ${fmt(v / jobs, 1)}`)
          .join(', '),
      ]);
  }
  return rows;
}

/** `total` plus the difference between two readings of the clocks, per process and queue. */
function addClocks(total: Clocks[], before: Clocks[], after: Clocks[]): Clocks[] {
  return total.map((t, i) => {
    const out: Clocks = { ...t };
    for (const queue of ['liveness', 'embed', 'light']) {
      const q1 = after[i]![queue];
      if (!q1 || typeof q1 === 'number') continue;
      const q0 = before[i]![queue];
      const base = q0 && typeof q0 !== 'number' ? q0 : { jobs: 0, msByStep: {} as Record<string, number> };
      const acc = t[queue] && typeof t[queue] !== 'number' ? (t[queue] as { jobs: number; msByStep: Record<string, number> }) : { jobs: 0, msByStep: {} };
      const msByStep = { ...acc.msByStep };
      for (const [k, v] of Object.entries(q1.msByStep)) msByStep[k] = (msByStep[k] ?? 0) + v - (base.msByStep[k] ?? 0);
      out[queue] = { jobs: acc.jobs + q1.jobs - base.jobs, msByStep };
    }
    return out;
  });
}

/** The alternated part's table: the engine, a single capture, a session of the minimum frames. */
function alternatedMarkdown(a: AlternatedFigures, clocks: string[][]): string {
  const ratio = (x: number, y: number) => `${fmt(x / y, 2)}×`;
  return [
    `Alternated, ${a.rounds} rounds (engine, single capture, session${a.lit ? ', session with lights' : ''} in turn, the order rotating each round), p50 / p99 wall ms, load average ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}:`,
    '',
    table(
      ['side', 'p50 / p99 ms', 'ratio of p50s', 'goal'],
      [
        [
          `the engine's own time (upload ${fmt(a.engineSteps.normalise)} + liveness ${fmt(a.engineSteps.liveness)} + embed ${fmt(a.engineSteps.embed)} ms, mean)`,
          `${fmt(a.engine.p50)} / ${fmt(a.engine.p99)}`,
          '1',
          '',
        ],
        [
          'single capture: POST /verify/self',
          `${fmt(a.single.p50)} / ${fmt(a.single.p99)}`,
          `${ratio(a.single.p50, a.engine.p50)} the engine`,
          '≤ 1.3× the engine',
        ],
        [
          'session of the minimum frames: create + frames',
          `${fmt(a.session.p50)} / ${fmt(a.session.p99)}`,
          `${ratio(a.session.p50, a.single.p50)} a single capture`,
          '≤ 2× a single capture',
        ],
        ['… of which the frames call', `${fmt(a.frames.p50)} / ${fmt(a.frames.p99)}`, `${ratio(a.frames.p50, a.single.p50)} a single capture`, ''],
        ...(a.lit
          ? [
              [
                'session of the minimum pose frames + lights (6 to 8 light frames, 480 px): create + frames',
                `${fmt(a.lit.session.p50)} / ${fmt(a.lit.session.p99)}`,
                `${ratio(a.lit.session.p50, a.single.p50)} a single capture`,
                '≤ 2.5× a single capture',
              ],
              [
                '… of which the frames call',
                `${fmt(a.lit.frames.p50)} / ${fmt(a.lit.frames.p99)}`,
                `${ratio(a.lit.frames.p50, a.single.p50)} a single capture`,
                '',
              ],
            ]
          : []),
        ['the passed session used: /verify/self with livenessSessionId', `${fmt(a.use.p50)} / ${fmt(a.use.p99)}`, '', ''],
      ],
    ),
    '',
    `Outcomes: single capture ${Object.entries(a.singleOutcomes)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}; sessions ${Object.entries(a.sessionOutcomes)
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}.`,
    '',
    `A single capture inside the service (means, ms): the workers' stages liveness ${fmt(a.singleInside.liveness, 1)}, embed ${fmt(a.singleInside.embed, 1)} ` +
      `(in place, in the liveness job, before the anti-spoof model), search (compared in the web process) ${fmt(a.singleInside.search, 1)}; \`latencyMs.total\` (from /verify/self's first line to the comparison's result) ${fmt(a.singleInside.total, 1)}; ` +
      `the rest of the wall time (the SearchLog row and the proof token after it; HTTP, the multipart body, the bearer, the route) ${fmt(a.singleInside.outside, 1)}.`,
    '',
    ...(a.cpu
      ? [
          table(
            ['CPU ms per call (mean, by process; the calls one at a time)', ...Object.keys(a.cpu.single), 'all'],
            (
              [
                ['single capture', a.cpu.single],
                ['session of the minimum frames (its use included)', a.cpu.session],
                ...(a.cpu.lit ? [['the same with its light frames (its use included)', a.cpu.lit] as const] : []),
              ] as const
            ).map(([name, c]) => [
              name,
              ...Object.keys(a.cpu!.single).map((k) => fmt(c[k] ?? 0, 1)),
              fmt(
                Object.values(c).reduce((x, y) => x + y, 0),
                1,
              ),
            ]),
          ),
          '',
        ]
      : []),
    table(
      ['face worker clocks (ms per job, mean)', 'jobs', 'steps'],
      [
        // The raw engine on the single capture's photo, named as the worker's clocks name its steps
        // (a tree whose raw server reports no steps shows none): the detector compared on one photo.
        [
          "the raw engine, the single capture's photo",
          String(a.rounds),
          Object.entries(a.engineSteps)
            .filter(([k]) => k.includes('.'))
            .map(([k, v]) => `${k.replace(/^(liveness|embed)\./, '')} ${fmt(v, 1)}`)
            .join(', '),
        ],
        ...a.clocks.single.map(([q, j, st]) => [`${q}, single captures`, j!, st!]),
        ...a.clocks.session.map(([q, j, st]) => [`${q}, sessions`, j!, st!]),
        ...(a.clocks.lit ?? []).map(([q, j, st]) => [`${q}, sessions with lights`, j!, st!]),
        ...clocks.map(([q, j, st]) => [`${q}, the whole part (warm-up included)`, j!, st!]),
      ],
    ),
  ].join('\n');
}

export async function runFacePathBench(): Promise<string> {
  console.log(
    `face-path bench on ${machine()}: ${FACE_PROCESSES} face process(es), ${ENROLLED} enrolled, one client ${CALLS} calls, ${IN_FLIGHT} in flight ${SECONDS} s; load average ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`,
  );
  const redis = await startPrivateRedis();
  await adminQuery(`DROP DATABASE IF EXISTS "${DB_NAME}" WITH (FORCE)`);
  await adminQuery(`CREATE DATABASE "${DB_NAME}"`);
  const migrator = createDb(dbUrl(DB_NAME), 1, { bindModels: false });
  await migrateLatest(migrator);
  await migrator.destroy();
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

  const portrait = await sharp(path.join(ROOT, 'test/fixtures/faces/grace_hopper_b.jpg')).resize(258, 282, { fit: 'cover' }).jpeg({ quality: 90 }).toBuffer();
  const photos = fixturePhotos()
    .filter((p) => !p.kind.startsWith('no face'))
    .map((p) => p.data);

  const [webPort, litWebPort, searchPort, ...facePorts] = await Promise.all([
    freePort(),
    freePort(),
    freePort(),
    ...Array.from({ length: FACE_PROCESSES }, freePort),
  ]);
  const env: Record<string, string> = {
    NODE_ENV: 'development',
    DATABASE_URL: dbUrl(DB_NAME),
    REDIS_URL: redis.url,
    REDIS_PREFIX: 'bench_fp',
    PORT: String(webPort),
    FACE_ENGINE_PORT: String(facePorts[0]),
    SEARCH_HEALTH_PORT: String(searchPort),
    LOG_LEVEL: 'warn',
    // The alternated part creates a session per round (and redraws those needing four frames).
    LIVENESS_SESSIONS_PER_HOUR: '100000',
    // The session's cost, not a person's time: the frames go as soon as the session exists (with the
    // default LIVENESS_MIN_STEP_MS they would be refused as implausible_timing before any face work).
    LIVENESS_MIN_STEP_MS: '0',
    // The bench sends its fixture photos again in every round (new bytes, the same pixels), which the
    // near-copy check refuses. This web process measures the pose frames' path, comparable with earlier
    // runs: without the light sequence; a second one (`litEnv`) runs the sessions with their lights.
    LIVENESS_NEAR_REPLAY_WINDOW_SECONDS: '0',
    LIVENESS_LIGHT: 'off',
    ADMIN_IDENTIFIER: '',
    ADMIN_PASSWORD: '',
  };
  const config = loadConfig({ ...process.env, ...env });
  const webUrl = `http://127.0.0.1:${webPort}`;
  // The same deployment's web process with the light sequence (SPEC 14.1's default): the sessions with lights.
  const litEnv = { ...env, PORT: String(litWebPort), LIVENESS_LIGHT: 'required' };
  const litWebUrl = `http://127.0.0.1:${litWebPort}`;
  // One entry file per process (processes/*.ts; older trees, measured for comparison: their main files).
  const entry = (name: 'web' | 'face' | 'search') =>
    existsSync(path.join(ROOT, 'processes', `${name}.ts`))
      ? `processes/${name}.ts`
      : { web: 'api/server.ts', face: 'workers/face/main.ts', search: 'workers/search/main.ts' }[name];
  const faces = facePorts.map((port) => startProcess(entry('face'), { ...env, FACE_ENGINE_PORT: String(port) }));
  const children: Record<string, ChildProcess[]> = {
    web: [startProcess(entry('web'), env), startProcess(entry('web'), litEnv)],
    face: faces,
    search: [startProcess(entry('search'), env)],
  };
  const deps = createDeps(config, { logger: createLogger({ level: 'warn', name: 'bench-client' }) });
  try {
    await Promise.all([
      ...facePorts.map((p) => waitHealthy(`http://127.0.0.1:${p}/health`)),
      waitHealthy(`${config.search.healthUrl}/health`),
      waitHealthy(`${webUrl}/openapi.json`),
      waitHealthy(`${litWebUrl}/openapi.json`),
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
    const [opSession] = await deps.db('sessions').insert({ subjectType: 'operator', subjectId: op.id }).returning('id');
    const opToken = (await deps.tokens.signAccess({ sub: op.id, aud: 'operator', sid: opSession.id })).token;
    // The consumer of /verify/self, enrolled from the full-size photo of the same person.
    const [user] = await deps.db('users').insert({ phone: '+2348030000001' }).returning('id');
    const [userSession] = await deps.db('sessions').insert({ subjectType: 'consumer', subjectId: user.id }).returning('id');
    const userToken = (await deps.tokens.signAccess({ sub: user.id, aud: 'consumer', sid: userSession.id })).token;
    const enrolFace = async (data: Buffer, userId: string) => {
      const a = await deps.face.analyseCapture(data, 'single');
      if (a.outcome !== 'ok') throw new Error(`enrolment: ${a.outcome}`);
      const e = await deps.face.embedCapture(a);
      await upsertCanonical(deps.db, userId, e.embedding, 'link_nin', e.engineVersion);
    };
    await enrolFace(readFileSync(path.join(ROOT, 'test/fixtures/faces/grace_hopper_a.jpg')), user.id);
    // (Not Bush: his face is the one the link bench links.)
    for (const [i, file] of ['lfw/Chavez_1.png', 'lfw/Powell_2.png', 'astronaut.png'].entries()) {
      const [u] = await deps
        .db('users')
        .insert({ phone: `+2348031${String(i).padStart(6, '0')}` })
        .returning('id');
      await enrolFace(readFileSync(path.join(ROOT, 'test/fixtures/faces', file)), u.id);
    }

    // The alternated part: a consumer enrolled from the full photo the session's frames come from.
    const [astro] = await deps.db('users').insert({ phone: '+2348039000001' }).returning('id');
    const [astroSession] = await deps.db('sessions').insert({ subjectType: 'consumer', subjectId: astro.id }).returning('id');
    const astroToken = (await deps.tokens.signAccess({ sub: astro.id, aud: 'consumer', sid: astroSession.id })).token;
    await enrolFace(readFileSync(path.join(ROOT, 'test/fixtures/faces/astronaut.png')), astro.id);
    // Each colour painted on the centre frame's face (test/helpers/screen-light.ts), at most 480 px on
    // the long side as the console sends light frames (console/src/consumer/LivenessCheck.tsx).
    const centre = readFileSync(path.join(ROOT, 'test/fixtures/faces/liveness/astronaut-center.jpg'));
    const painted = await paintLights(deps.face, centre, LIGHT_COLOURS);
    const litFrames = new Map(
      await Promise.all(
        LIGHT_COLOURS.map(
          async (c, i) => [c, await sharp(painted[i]!).resize(480, 480, { fit: 'inside', withoutEnlargement: true }).jpeg({ quality: 92 }).toBuffer()] as const,
        ),
      ),
    );
    const alternatedClocks0 = await clocksNowOf(facePorts);
    const alt = await benchAlternated<Clocks[]>({
      clocks: { read: () => clocksNowOf(facePorts), rows: clockDeltaOf, add: addClocks, zero: () => facePorts.map(() => ({ pid: 0, cpuMs: 0 }) as Clocks) },
      webUrl,
      userToken: astroToken,
      stem: 'astronaut',
      minFrames: config.liveness.minFrames,
      modelsDir: path.resolve(ROOT, config.face.modelsDir),
      rounds: ROUNDS,
      lights: { webUrl: litWebUrl, frames: litFrames },
      ...(SIDES ? { sides: SIDES } : {}),
      // Both web processes (each side uses one), the face and search processes, Redis.
      cpu: () => {
        const parts: Record<string, number> = {};
        for (const [name, cs] of Object.entries(children)) parts[name] = cs.reduce((a, ch) => a + (procCpuSeconds(ch.pid!) ?? 0), 0);
        parts.redis = procCpuSeconds(redis.pid()!) ?? 0;
        return parts;
      },
    });
    const alternatedClocks = clockDeltaOf(alternatedClocks0, await clocksNowOf(facePorts));
    const altMd = alternatedMarkdown(alt, alternatedClocks);
    if (ONLY === 'session') {
      saveResults('face-path-session', { faceProcesses: FACE_PROCESSES, alt, alternatedClocks });
      console.log(`\n${altMd}`);
      return altMd;
    }

    const rawRun = (): RawResult => {
      const args = {
        seconds: SECONDS / 2,
        threads: config.face.intraOpThreads,
        oneCalls: CALLS,
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

    // One client, sequential.
    const oneClient = async (route: 'verify/self' | 'identify') => {
      const call = () =>
        route === 'identify'
          ? post(`${webUrl}/identify`, opToken, 'file', portrait, { attestation: 'true' })
          : post(`${webUrl}/verify/self`, userToken, 'image', portrait);
      for (let i = 0; i < 10; i++) await call();
      const rows: Awaited<ReturnType<typeof post>>[] = [];
      for (let i = 0; i < CALLS; i++) rows.push(await call());
      const stage = (k: string) => summarise(rows.map((r) => r.latencyMs[k] ?? 0)).p50;
      // The slowest calls, by part: where the tail (p99 ÷ p50) comes from.
      const slowest = [...rows]
        .sort((a, b) => b.wall - a.wall)
        .slice(0, 3)
        .map((r) => `${fmt(r.wall)} (total ${r.latencyMs.total}: liveness ${r.latencyMs.liveness}, embed ${r.latencyMs.embed}, search ${r.latencyMs.search})`);
      return {
        wall: summarise(rows.map((r) => r.wall)),
        total: summarise(rows.map((r) => r.latencyMs.total ?? 0)),
        liveness: stage('liveness'),
        embed: stage('embed'),
        search: stage('search'),
        outcomes: [...new Set(rows.map((r) => r.outcome))],
        slowest,
      };
    };
    const clocksNow = () => clocksNowOf(facePorts);
    const clockDelta = clockDeltaOf;
    const selfClocks0 = await clocksNow();
    const self = await oneClient('verify/self');
    const selfClocks = clockDelta(selfClocks0, await clocksNow()).map(([q, j, s]) => [`${q} (one client, /verify/self, incl. warm-up)`, j!, s!]);
    const ident1 = await oneClient('identify');
    const face = (f: string) => readFileSync(path.join(ROOT, 'test/fixtures/faces', f));
    const link = await benchLink({ webUrl, deps, registryPhoto: face('lfw/Bush_1.png'), selfie: face('lfw/Bush_3.png'), calls: LINKS });

    // Load: IN_FLIGHT identifies at a time over the fixture photos.
    const pids = (await deps.db.raw('SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()')).rows as {
      pid: number;
    }[];
    const cpuNow = async () => {
      const parts: Record<string, number> = {};
      for (const [name, cs] of Object.entries(children)) parts[name] = cs.reduce((a, ch) => a + (procCpuSeconds(ch.pid!) ?? 0), 0);
      const live = (await deps.db.raw('SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()')).rows as {
        pid: number;
      }[];
      for (const p of live) if (!pids.some((q) => q.pid === p.pid)) pids.push(p);
      parts.postgres = pids.reduce((a, r) => a + (procCpuSeconds(r.pid) ?? 0), 0);
      parts.redis = procCpuSeconds(redis.pid()!) ?? 0;
      return parts;
    };
    const statsNow = async () => commandStats(await deps.redis.info('commandstats'));
    // (This client's own deps hold Redis connections too; they are idle during the loop.)
    const [cpu0, clocks0, stats0] = await Promise.all([cpuNow(), clocksNow(), statsNow()]);
    const outcomes: Record<string, number> = {};
    const load = await closedLoop(IN_FLIGHT, SECONDS, photos, async (p) => {
      const r = await post(`${webUrl}/identify`, opToken, 'file', p, { attestation: 'true' });
      outcomes[r.outcome] = (outcomes[r.outcome] ?? 0) + 1;
    });
    const [cpu1, clocks1, stats1] = await Promise.all([cpuNow(), clocksNow(), statsNow()]);
    const rawAfter = rawRun();

    // Figures.
    const n = load.done;
    const cpuParts = Object.fromEntries(Object.keys(cpu1).map((k) => [k, (1000 * (cpu1[k]! - cpu0[k]!)) / n]));
    const systemCpuMs = Object.values(cpuParts).reduce((a, b) => a + b, 0);
    const rawCpuMs = (rawBefore.loop.cpuMs + rawAfter.loop.cpuMs) / 2;
    const rawPerCoreSecond = 1000 / rawCpuMs;
    const rawOne = summarise([...rawBefore.one.wall, ...rawAfter.one.wall]);
    const redisCalls = Object.entries(stats1)
      .map(([k, v]) => [k, (v - (stats0[k] ?? 0)) / n] as const)
      .filter(([, v]) => v >= 0.05)
      .sort((a, b) => b[1] - a[1]);
    const clockRows = [...selfClocks, ...clockDelta(clocks0, clocks1).map(([q, j, st]) => [`${q} (${IN_FLIGHT} in flight)`, j!, st!])];
    const rawSteps = Object.entries(rawBefore.one.steps)
      .map(([k, v]) => `${k} ${fmt(v, 1)}`)
      .join(', ');

    const goals = {
      selfP50: self.wall.p50,
      wallOverEngine: self.wall.p50 / rawOne.p50,
      cpuRatio: systemCpuMs / rawCpuMs,
      throughputRatio: load.perSecond / rawPerCoreSecond,
      p99OverP50: self.wall.p99 / self.wall.p50,
    };
    const stagesRow = (name: string, r: typeof self) => {
      const inStages = r.liveness + r.embed + r.search;
      return [
        name,
        `${fmt(r.wall.p50)} / ${fmt(r.wall.p99)}`,
        `liveness ${fmt(r.liveness)} + embed ${fmt(r.embed)} + search ${fmt(r.search)} = ${fmt(inStages)}`,
        fmt(r.total.p50),
        `${fmt(100 * (1 - inStages / r.wall.p50), 0)} %`,
        r.outcomes.join(', '),
      ];
    };
    const md = [
      `Machine: ${machine()}; load average at the end ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}; ${FACE_PROCESSES} face process(es), ` +
        `${ENROLLED} synthetic + 4 real enrolled; private redis-server.`,
      '',
      table(
        ['figure', 'measured', 'goal'],
        [
          ['one client, /verify/self p50 wall', `${fmt(goals.selfP50)} ms`, '≤ 60 ms'],
          [
            "one client, wall ÷ the engine's own time for the same photo",
            `${fmt(goals.wallOverEngine, 2)}× (${fmt(self.wall.p50)} / ${fmt(rawOne.p50)} ms)`,
            '≤ 1.15×',
          ],
          [
            `CPU per identify ÷ raw engine CPU per image, ${IN_FLIGHT} in flight`,
            `${fmt(goals.cpuRatio, 2)} (${fmt(systemCpuMs, 1)} / ${fmt(rawCpuMs, 1)} ms)`,
            '≤ 1.10',
          ],
          [
            'identifies per second on 2 cores ÷ raw engine images per core-second',
            `${fmt(goals.throughputRatio, 2)} (${fmt(load.perSecond, 1)} / ${fmt(rawPerCoreSecond, 1)})`,
            '≥ 1.7',
          ],
          ['p99 ÷ p50 at one client (/verify/self)', `${fmt(goals.p99OverP50, 2)} (${fmt(self.wall.p99)} / ${fmt(self.wall.p50)} ms)`, '≤ 1.3'],
        ],
      ),
      '',
      table(
        ['route (one client, 258×282 portrait)', 'p50 / p99 wall ms', 'stages the service reports (p50)', 'total p50', 'wall not spent in stages', 'outcomes'],
        [stagesRow('POST /verify/self', self), stagesRow('POST /identify', ident1)],
      ),
      '',
      `NIN link, one client, ${LINKS} links (validate + verify-face with a selfie + link, each a first link): ${fmt(link.wall.p50)} / ${fmt(link.wall.p99)} ms p50 / p99 wall; ` +
        `validate ${fmt(link.validate.p50)}, verify-face ${fmt(link.verifyFace.p50)}, link ${fmt(link.link.p50)} ms p50.`,
      '',
      `Slowest of the ${CALLS} one-client calls, wall ms: /verify/self ${self.slowest.join('; ')}; /identify ${ident1.slowest.join('; ')}.`,
      '',
      `Raw engine, same photo, one call at a time: ${fmt(rawOne.p50)} / ${fmt(rawOne.p99)} ms p50 / p99 (upload ${fmt(rawBefore.one.normalise)}, liveness ${fmt(rawBefore.one.liveness)}, embed ${fmt(rawBefore.one.embed)} ms p50, first run); ` +
        `raw loop over the fixture photos: ${fmt(rawBefore.loop.perSecond, 1)} and ${fmt(rawAfter.loop.perSecond, 1)} images/s, ${fmt(rawBefore.loop.cpuMs, 1)} and ${fmt(rawAfter.loop.cpuMs, 1)} CPU ms per image (before and after the system).`,
      '',
      `${IN_FLIGHT} in flight: ${fmt(load.perSecond, 1)} identifies/s, ${fmt(summarise(load.samples).p50)} / ${fmt(summarise(load.samples).p99)} ms p50 / p99, ${n} requests (${Object.entries(
        outcomes,
      )
        .map(([k, v]) => `${k} ${v}`)
        .join(', ')}).`,
      '',
      table(['CPU ms per identify', ...Object.keys(cpuParts), 'total'], [['', ...Object.values(cpuParts).map((v) => fmt(v, 1)), fmt(systemCpuMs, 1)]]),
      '',
      `Redis commands per identify: ${redisCalls.map(([k, v]) => `${k} ${fmt(v, 1)}`).join(', ')} (total ${fmt(
        redisCalls.reduce((a, [, v]) => a + v, 0),
        1,
      )}).`,
      '',
      table(['face worker clocks (ms per job, mean)', 'jobs', 'steps'], clockRows),
      '',
      `Raw engine steps, same photo (ms per call, mean): ${rawSteps}.`,
      '',
      altMd,
    ].join('\n');
    saveResults('face-path', {
      faceProcesses: FACE_PROCESSES,
      enrolled: ENROLLED,
      inFlight: IN_FLIGHT,
      seconds: SECONDS,
      goals,
      self,
      identify: ident1,
      link,
      rawBefore: { ...rawBefore, one: { ...rawBefore.one, wall: summarise(rawBefore.one.wall) } },
      rawAfter: { ...rawAfter, one: { ...rawAfter.one, wall: summarise(rawAfter.one.wall) } },
      load: { ...load, samples: summarise(load.samples) },
      cpuParts,
      redisCalls,
      clockRows,
      outcomes,
      alt,
      alternatedClocks,
    });
    console.log(`\n${md}`);
    return md;
  } finally {
    await closeDeps(deps);
    await Promise.all(Object.values(children).flat().map(stopProcess));
    await redis.stop();
    if (!process.env.BENCH_KEEP_DB) await adminQuery(`DROP DATABASE IF EXISTS "${DB_NAME}" WITH (FORCE)`);
  }
}

if (import.meta.url === `file://${process.argv[1]}`) await runFacePathBench();
