/**
 * `npm start` supervises and stops as a whole.
 * - The supervisor restarts a child that dies (kill -9) with backoff while the others keep running, and
 *   marks a crash loop in its status file (which GET /health reports as `processes`).
 * - The real `npm start`, started through npm as a user does: kill -9 of the face worker is followed by
 *   a restart (the others keep their pids, /health shows the restart and the engine back), and SIGTERM
 *   to the npm process stops every process of the tree. Before, the first stopped the whole service and
 *   the second stopped nothing (npm's `sh -c` did not pass the signal on).
 */
import test from 'ava';
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Supervisor, type ChildStatus } from '../platform/processes/supervisor.js';
import { freePort } from '../scripts/lib/private-services.js';
import { createTestDatabase, testRedisPrefix, TEST_REDIS_URL } from './helpers/db.js';
import { ROOT } from './helpers/harness.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const alive = (pid: number) => {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
};

async function until<T>(what: string, ms: number, get: () => T | undefined | Promise<T | undefined>): Promise<T> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    const v = await get();
    if (v) return v;
    await sleep(100);
  }
  throw new Error(`timed out waiting for ${what}`);
}

test('the supervisor restarts a killed child with backoff, leaves the others alone, and reports a crash loop', async (t) => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'faceid-sup-'));
  const statusFile = path.join(dir, 'status.json');
  const logs: string[] = [];
  const sup = new Supervisor({
    initialBackoffMs: 100,
    maxBackoffMs: 400,
    stableAfterMs: 60_000,
    crashLoopRestarts: 3,
    crashLoopWindowMs: 60_000,
    statusFile,
    log: (m) => logs.push(m),
  });
  const sleeper = ['-e', 'setInterval(() => {}, 1000)'];
  sup.add({ name: 'steady', command: process.execPath, args: sleeper, env: process.env, cwd: ROOT });
  sup.add({ name: 'victim', command: process.execPath, args: sleeper, env: process.env, cwd: ROOT });
  sup.add({ name: 'crasher', command: process.execPath, args: ['-e', 'process.exit(3)'], env: process.env, cwd: ROOT });
  try {
    const steady = sup.pid('steady')!;
    const victim = sup.pid('victim')!;
    process.kill(victim, 'SIGKILL');
    const restarted = await until('the victim to be restarted', 10_000, () => {
      const pid = sup.pid('victim');
      return pid && pid !== victim ? pid : undefined;
    });
    t.true(alive(restarted));
    t.is(sup.pid('steady'), steady, 'the others keep running');
    const crasher = await until('a crash loop', 15_000, () => {
      const s = (JSON.parse(readFileSync(statusFile, 'utf8')) as { processes: ChildStatus[] }).processes.find((p) => p.name === 'crasher');
      return s?.crashLoop ? s : undefined;
    });
    t.true(crasher.restarts >= 3);
    t.like(crasher.lastExit, { code: 3 });
    t.true(logs.some((l) => /victim exited \(SIGKILL\)/.test(l)));
    t.true(logs.some((l) => /CRASH LOOP/.test(l)));
  } finally {
    const pids = sup
      .names()
      .map((n) => sup.pid(n))
      .filter((p): p is number => !!p);
    await sup.stop(sup.names(), 5000);
    await sleep(200);
    t.deepEqual(pids.filter(alive), [], 'stop() leaves no child running');
  }
});

test('npm start: kill -9 of the face worker is survived; SIGTERM to the npm process stops every process', async (t) => {
  t.timeout(300_000);
  const db = await createTestDatabase();
  const dir = mkdtempSync(path.join(os.tmpdir(), 'faceid-npm-start-'));
  const [port, facePort, searchPort] = [await freePort(), await freePort(), await freePort()];
  const statusFile = path.join(dir, 'supervisor.json');
  const npm = spawn('npm', ['start', '--silent'], {
    cwd: ROOT,
    env: {
      ...process.env,
      PORT: String(port),
      FACE_ENGINE_PORT: String(facePort),
      SEARCH_HEALTH_PORT: String(searchPort),
      DATABASE_URL: db.url,
      REDIS_URL: TEST_REDIS_URL,
      REDIS_PREFIX: testRedisPrefix(),
      LOG_LEVEL: 'warn',
      SUPERVISOR_STATUS_FILE: statusFile,
      FACEID_SERVICE_FILE: path.join(dir, 'service.json'),
      RESTART_BACKOFF_INITIAL_MS: '200',
      // An administrator: /health gives the supervised processes to administrators only (SPEC 12.3).
      ADMIN_IDENTIFIER: 'supervision-admin',
      ADMIN_PASSWORD: 'supervision-admin-pass',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let adminToken: string | undefined;
  let output = '';
  npm.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  npm.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  const health = async () => {
    try {
      if (!adminToken) {
        const login = await fetch(`http://127.0.0.1:${port}/auth/operator/login`, {
          method: 'POST',
          headers: { 'content-type': 'application/json' },
          body: JSON.stringify({ identifier: 'supervision-admin', password: 'supervision-admin-pass' }),
          signal: AbortSignal.timeout(2000),
        });
        if (login.ok) adminToken = ((await login.json()) as { accessToken: string }).accessToken;
      }
      const res = await fetch(`http://127.0.0.1:${port}/health`, {
        headers: adminToken ? { authorization: `Bearer ${adminToken}` } : {},
        signal: AbortSignal.timeout(2000),
      });
      return (await res.json()) as { dependencies: Record<string, { up: boolean }>; processes?: ChildStatus[] };
    } catch {
      return undefined;
    }
  };
  const statusPids = () => JSON.parse(readFileSync(statusFile, 'utf8')) as { supervisorPid: number; processes: ChildStatus[] };
  let tree: number[] = [];
  try {
    await until('the service to be up', 180_000, async () => {
      const h = await health();
      return h?.dependencies.face_engine?.up && h.dependencies.vector_index?.up ? h : undefined;
    });
    const before = statusPids();
    const pid = (name: string) => before.processes.find((p) => p.name === name)!.pid!;
    process.kill(pid('face'), 'SIGKILL');
    const after = await until('the face worker to be back', 120_000, async () => {
      const h = await health();
      const face = h?.processes?.find((p) => p.name === 'face');
      return face && face.restarts >= 1 && face.state === 'running' && h!.dependencies.face_engine!.up ? h : undefined;
    });
    t.is(after.processes!.find((p) => p.name === 'web')!.pid, pid('web'), 'web kept serving');
    t.is(after.processes!.find((p) => p.name === 'search')!.pid, pid('search'), 'search kept serving');

    const now = statusPids();
    tree = [npm.pid!, now.supervisorPid, ...now.processes.map((p) => p.pid!).filter(Boolean)];
    npm.kill('SIGTERM');
    await until('every process of the tree to be gone', 60_000, () => (tree.every((p) => !alive(p)) ? true : undefined));
    t.pass();
  } catch (e) {
    t.log(output.slice(-3000));
    throw e;
  } finally {
    for (const p of tree) if (alive(p)) process.kill(p, 'SIGKILL');
    if (npm.exitCode === null) npm.kill('SIGKILL');
    await db.drop();
  }
});
