/**
 * The fault suite (`npm run chaos`): the real `npm start` process tree (scripts/start.ts: web, face,
 * search under the supervisor) on its own database and a PRIVATE redis-server (the shared PostgreSQL and
 * Redis are never stopped), under bounded load (a closed loop of CHAOS_CLIENTS clients sending /identify
 * with a real photo and PATCH /users/{id}/preferences), with one fault at a time:
 *   1. kill -9 of the face worker; 2. kill -9 of the search worker; 3. the private Redis stopped, then
 *   restarted; 4. SIGTERM to the supervisor under load.
 * For each: status counts, whether every 503 carried Retry-After, hangs (answers slower than the job
 * timeout + 2 s, or none), time from the fault to the next 200, and lost answered writes, read back from
 * PostgreSQL afterwards (every answered /identify has its SearchLog row; the last answered preferences
 * change is the stored one). Prints one JSON report; exits 1 when a figure breaks the bar.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes, randomUUID } from 'node:crypto';
import { mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import knexFactory from 'knex';
import { TokenService } from '../api/services/token-service.js';
import { loadConfig } from '../shared/config.js';
import { createDb } from '../shared/db.js';
import { freePort } from '../scripts/lib/local-services.js';
import { startPrivateRedis } from '../test/helpers/private-redis.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const CLIENTS = Number(process.env.CHAOS_CLIENTS ?? 3);
const JOB_TIMEOUT_MS = 10_000;
const HANG_MS = JOB_TIMEOUT_MS + 2_000;
const PHOTO = readFileSync(path.join(ROOT, 'test', 'fixtures', 'faces', 'lfw', 'Bush_1.png'));
const say = (m: string) => console.error(`[chaos] ${m}`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

interface Sample {
  at: number;
  kind: 'identify' | 'preferences';
  status: number;
  ms: number;
  retryAfter: string | null;
  referenceId?: string;
  language?: string;
}

async function main(): Promise<void> {
  const base = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const dbName = `faceid_chaos_${randomBytes(4).toString('hex')}`;
  const admin = knexFactory({ client: 'pg', connection: base, pool: { min: 0, max: 1 } });
  await admin.raw(`CREATE DATABASE "${dbName}"`);
  const dbUrl = Object.assign(new URL(base), { pathname: `/${dbName}` }).toString();
  const redis = await startPrivateRedis();
  const [port, facePort, searchPort] = [await freePort(), await freePort(), await freePort()];
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'faceid-chaos-'));
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    PORT: String(port),
    FACE_ENGINE_PORT: String(facePort),
    SEARCH_HEALTH_PORT: String(searchPort),
    DATABASE_URL: dbUrl,
    REDIS_URL: redis.url,
    REDIS_PREFIX: 'chaos',
    LOG_LEVEL: 'warn',
    FACE_JOB_TIMEOUT_MS: String(JOB_TIMEOUT_MS),
    SUPERVISOR_STATUS_FILE: path.join(tmp, 'supervisor.json'),
    FACEID_SERVICE_FILE: path.join(tmp, 'service.json'),
    RESTART_BACKOFF_INITIAL_MS: '200',
    OPERATOR_LOGINS_PER_IP_PER_HOUR: '100000',
  };
  const url = `http://127.0.0.1:${port}`;
  const report: Record<string, unknown> = { clients: CLIENTS, jobTimeoutMs: JOB_TIMEOUT_MS };
  let supervisor: ChildProcess | undefined;
  let db: ReturnType<typeof knexFactory> | undefined;
  const failures: string[] = [];
  try {
    const startTree = async () => {
      supervisor = spawn(process.execPath, ['--import', 'tsx', 'scripts/start.ts'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
      supervisor.stdout!.on('data', (d: Buffer) => {
        for (const line of d.toString().split('\n')) if (line.startsWith('[start]')) say(line);
      });
      supervisor.stderr!.resume();
      await waitFor(async () => {
        const h = await getJson(`${url}/health`);
        const deps = h?.dependencies as Record<string, { up: boolean }> | undefined;
        return !!deps && deps.face_engine!.up && deps.vector_index!.up;
      }, 180_000, 'the service to be healthy');
    };
    await startTree();
    db = createDb(dbUrl, 2);
    const tokens = new TokenService(loadConfig({ ...env }));
    const [op] = await db('operators').insert({ identifier: `chaos-${randomUUID().slice(0, 8)}`, displayName: 'Chaos', role: 'operator', status: 'active', mustResetPassword: false, passwordHash: 'x', orgId: 'default' }).returning('id');
    const [opSession] = await db('sessions').insert({ subjectType: 'operator', subjectId: op.id }).returning('id');
    const opToken = (await tokens.signAccess({ sub: op.id, aud: 'operator', sid: opSession.id })).token;
    const [user] = await db('users').insert({ phone: `+234803${String(Date.now()).slice(-7)}` }).returning('id');
    const [userSession] = await db('sessions').insert({ subjectType: 'consumer', subjectId: user.id }).returning('id');
    const userToken = (await tokens.signAccess({ sub: user.id, aud: 'consumer', sid: userSession.id })).token;

    const samples: Sample[] = [];
    let running = true;
    let seq = 0;
    const languages = ['en', 'ha', 'ig', 'yo', 'pcm'];
    const client = async (i: number) => {
      while (running) {
        const started = Date.now();
        // Preferences changes from one client only, one at a time: the last answered one must be the stored one.
        const kind = i === 0 && seq++ % 2 === 0 ? 'preferences' : 'identify';
        try {
          if (kind === 'identify') {
            const form = new FormData();
            form.append('attestation', 'true');
            form.append('file', new Blob([new Uint8Array(PHOTO)], { type: 'image/png' }), 'p.png');
            const res = await fetch(`${url}/identify`, { method: 'POST', headers: { authorization: `Bearer ${opToken}` }, body: form, signal: AbortSignal.timeout(HANG_MS + 8000) });
            const body = (await res.json().catch(() => ({}))) as { referenceId?: string };
            samples.push({ at: started, kind, status: res.status, ms: Date.now() - started, retryAfter: res.headers.get('retry-after'), referenceId: body.referenceId });
          } else {
            const language = languages[seq % languages.length]!;
            const res = await fetch(`${url}/users/${user.id}/preferences`, { method: 'PATCH', headers: { authorization: `Bearer ${userToken}`, 'content-type': 'application/json' }, body: JSON.stringify({ language }), signal: AbortSignal.timeout(HANG_MS + 8000) });
            await res.text();
            samples.push({ at: started, kind, status: res.status, ms: Date.now() - started, retryAfter: res.headers.get('retry-after'), language });
          }
        } catch {
          samples.push({ at: started, kind, status: 0, ms: Date.now() - started, retryAfter: null });
          await sleep(200);
        }
      }
    };
    const load = Array.from({ length: CLIENTS }, (_, i) => client(i));

    const phase = async (name: string, fault: () => Promise<void>, opts: { settleMs?: number; expectUnavailable?: boolean } = {}) => {
      const from = samples.length;
      await sleep(3000);
      const faultAt = Date.now();
      say(`${name}: fault`);
      await fault();
      // Recovery: the first /identify 200 sent after the fault.
      await waitFor(async () => samples.slice(from).some((s) => s.at >= faultAt && s.kind === 'identify' && s.status === 200), 120_000, `${name}: a 200 after the fault`).catch(() => {});
      await sleep(opts.settleMs ?? 3000);
      const window = samples.slice(from);
      const after = window.filter((s) => s.at >= faultAt);
      const firstOk = after.find((s) => s.kind === 'identify' && s.status === 200);
      const statuses: Record<string, number> = {};
      for (const s of window) statuses[`${s.kind} ${s.status}`] = (statuses[`${s.kind} ${s.status}`] ?? 0) + 1;
      const r = {
        requests: window.length,
        statuses,
        fiveHundreds: window.filter((s) => s.status >= 500 && s.status !== 503).length,
        unavailableWithoutRetryAfter: window.filter((s) => s.status === 503 && !s.retryAfter).length,
        hangs: window.filter((s) => s.status === 0 || s.ms > HANG_MS).length,
        slowestMs: Math.max(0, ...window.map((s) => s.ms)),
        recoveryMs: firstOk ? firstOk.at + firstOk.ms - faultAt : null,
      };
      report[name] = r;
      say(`${name}: ${JSON.stringify(r)}`);
      if (r.fiveHundreds) failures.push(`${name}: ${r.fiveHundreds} answers 5xx other than 503`);
      if (r.unavailableWithoutRetryAfter) failures.push(`${name}: ${r.unavailableWithoutRetryAfter} 503 without Retry-After`);
      if (r.hangs) failures.push(`${name}: ${r.hangs} hangs`);
      if (r.recoveryMs === null) failures.push(`${name}: no 200 after the fault`);
    };

    const pidOf = (name: string) => {
      const status = JSON.parse(readFileSync(env.SUPERVISOR_STATUS_FILE!, 'utf8')) as { processes: { name: string; pid: number | null }[] };
      return status.processes.find((p) => p.name === name)!.pid!;
    };
    await phase('kill -9 face worker (npm start)', async () => {
      process.kill(pidOf('face'), 'SIGKILL');
    });
    await phase('kill -9 search worker (npm start)', async () => {
      process.kill(pidOf('search'), 'SIGKILL');
    });
    await phase('private Redis stopped 5 s, then restarted', async () => {
      await redis.stop();
      await sleep(5000);
      await redis.start();
    });

    // SIGTERM under load: the tree stops (web drains first); nothing is left running.
    const beforeStop = samples.length;
    const stopAt = Date.now();
    const pids = ['web', 'face', 'search'].map(pidOf);
    say('SIGTERM to the supervisor under load');
    supervisor!.kill('SIGTERM');
    await new Promise((r) => supervisor!.once('exit', r));
    const stoppedMs = Date.now() - stopAt;
    running = false;
    await Promise.all(load);
    const alive = pids.filter((p) => {
      try {
        process.kill(p, 0);
        return true;
      } catch {
        return false;
      }
    });
    const duringStop = samples.slice(beforeStop).filter((s) => s.at < stopAt + stoppedMs);
    report['SIGTERM under load'] = {
      stoppedMs,
      processesLeft: alive.length,
      answeredDuringStop: duringStop.filter((s) => s.status > 0).length,
      resetDuringStop: duringStop.filter((s) => s.status === 0 && s.at < stopAt).length,
    };
    if (alive.length) failures.push(`SIGTERM: ${alive.length} processes outlived the supervisor`);

    // Lost answered writes, read back from PostgreSQL.
    const answeredIdentify = samples.filter((s) => s.kind === 'identify' && s.status === 200 && s.referenceId);
    const ids = answeredIdentify.map((s) => s.referenceId!);
    const found = new Set<string>();
    for (let i = 0; i < ids.length; i += 500) {
      for (const row of await db('searchLogs').whereIn('id', ids.slice(i, i + 500)).select('id')) found.add(row.id);
    }
    const lastPrefs = samples.filter((s) => s.kind === 'preferences' && s.status === 200).sort((a, b) => a.at + a.ms - (b.at + b.ms)).at(-1);
    const stored = await db('preferences').where({ userId: user.id }).first('language');
    report.lostWrites = {
      identifyAnswered: ids.length,
      identifyWithoutSearchLog: ids.filter((id) => !found.has(id)).length,
      lastAnsweredLanguage: lastPrefs?.language ?? null,
      storedLanguage: stored?.language ?? null,
    };
    if (ids.some((id) => !found.has(id))) failures.push('answered /identify calls without their SearchLog row');
    report.totalRequests = samples.length;
    report.failures = failures;
  } finally {
    if (supervisor && supervisor.exitCode === null) supervisor.kill('SIGKILL');
    await db?.destroy();
    await redis.stop();
    await admin.raw(`DROP DATABASE IF EXISTS "${dbName}" WITH (FORCE)`).catch(() => {});
    await admin.destroy();
  }
  console.log(JSON.stringify(report, null, 2));
  if (failures.length) process.exitCode = 1;
}

async function getJson(u: string): Promise<Record<string, unknown> | null> {
  try {
    const res = await fetch(u, { signal: AbortSignal.timeout(2000) });
    return (await res.json()) as Record<string, unknown>;
  } catch {
    return null;
  }
}

async function waitFor(check: () => Promise<boolean>, ms: number, what: string): Promise<void> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    if (await check()) return;
    await sleep(200);
  }
  throw new Error(`timed out waiting for ${what}`);
}

await main();
