/**
 * The one launcher of `npm start` and `npm run start:ha` (platform/processes/launcher.ts), with small
 * child processes in place of the service's (a real start:ha starts Patroni and etcd):
 * - both layouts stop web with the grace derived from the stop deadlines (platform/processes/shutdown.ts),
 *   beyond web's own (`npm run start:ha` used to give web 15 s where it may take 20 s);
 * - after a stop signal the supervisor restarts nothing, whichever child exits meanwhile, and every child
 *   is gone when the launcher exits (SIGTERM to the process group of `npm run start:ha` reached the
 *   workers directly; quicker than web's drain, they were restarted and outlived the launcher).
 */
import test from 'ava';
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { loadConfig } from '../processes/config.js';
import { stopPlan } from '../platform/processes/launcher.js';
import { supervisorGraceMs, webStopMs, WORKER_STOP_MS } from '../platform/processes/shutdown.js';
import { Supervisor, type ChildStatus } from '../platform/processes/supervisor.js';
import { haCopies } from '../scripts/start-ha.js';
import { oneMachineCopies } from '../scripts/start.js';
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

async function until<T>(what: string, ms: number, get: () => T | undefined): Promise<T> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    const v = get();
    if (v) return v;
    await sleep(50);
  }
  throw new Error(`timed out waiting for ${what}`);
}

/**
 * A child that, on SIGTERM, takes `drainMs` to stop (0: at once), as web drains and the workers hand
 * back their job; it says `ready` (and writes `<readyDir>/<pid>`) once it handles the signal.
 */
const childSource = (drainMs: number, readyDir?: string) => `
process.on('SIGTERM', () => setTimeout(() => process.exit(0), ${drainMs}));
setInterval(() => {}, 1000);
console.log('ready');
${readyDir ? `require('node:fs').writeFileSync(${JSON.stringify(readyDir)} + '/' + process.pid, '');` : ''}
`;

const HA_PORTS = { web: [1, 2], face: [3, 4], search: [5, 6] };

test('both layouts stop web first, with a grace beyond its own stop deadline, whatever SHUTDOWN_DRAIN_MS', (t) => {
  for (const drain of [undefined, '0', '20000', '60000']) {
    const c = loadConfig({ NODE_ENV: 'development', ...(drain ? { SHUTDOWN_DRAIN_MS: drain } : {}) });
    for (const [layout, copies] of [
      ['npm start', oneMachineCopies(c)],
      ['npm run start:ha', haCopies(HA_PORTS)],
    ] as const) {
      const plan = stopPlan(copies, c);
      const webs = copies.filter((x) => x.process.name === 'web').map((x) => x.name);
      t.deepEqual(plan.groups[0], webs, `${layout}: every web copy first, alone`);
      t.deepEqual(plan.groups.flat().sort(), copies.map((x) => x.name).sort(), `${layout}: every copy stopped`);
      t.true(plan.graceMs > webStopMs(c), `${layout}, SHUTDOWN_DRAIN_MS=${c.http.shutdownDrainMs}: grace ${plan.graceMs} ms, web ${webStopMs(c)} ms`);
      t.true(plan.graceMs > WORKER_STOP_MS);
      t.is(plan.graceMs, supervisorGraceMs(c));
    }
  }
  // The default: web drains 15 s then closes for 5 s; the launcher's SIGKILL comes after 20 s, for either layout.
  const c = loadConfig({ NODE_ENV: 'development' });
  t.true(stopPlan(haCopies(HA_PORTS), c).graceMs > 20_000);
  t.is(haCopies(HA_PORTS).filter((x) => x.process.name === 'web').length, 2, 'start:ha runs two web processes');
});

test('start:ha gives each copy its own port; npm start the first of each on its setting, the others a free one', (t) => {
  const ha = haCopies(HA_PORTS);
  t.deepEqual(
    ha.map((x) => [x.name, x.env]),
    [
      ['web', { PORT: '1' }],
      ['web-2', { PORT: '2' }],
      ['face', { FACE_ENGINE_PORT: '3' }],
      ['face-2', { FACE_ENGINE_PORT: '4' }],
      ['search', { SEARCH_HEALTH_PORT: '5' }],
      ['search-2', { SEARCH_HEALTH_PORT: '6' }],
    ],
  );
  const one = oneMachineCopies(loadConfig({ NODE_ENV: 'development', FACE_PROCESSES: '2', SEARCH_PROCESSES: '1' }));
  t.deepEqual(
    one.map((x) => [x.name, x.env]),
    [
      ['web', {}],
      ['face', {}],
      ['face-2', { FACE_ENGINE_PORT: '0' }],
      ['search', {}],
    ],
  );
});

test('after a stop signal the supervisor restarts nothing, and every child is gone when its shutdown ends', async (t) => {
  t.timeout(30_000);
  const logs: string[] = [];
  const sup = new Supervisor({
    initialBackoffMs: 50,
    maxBackoffMs: 50,
    stableAfterMs: 60_000,
    crashLoopRestarts: 50,
    crashLoopWindowMs: 60_000,
    log: (m) => logs.push(m),
  });
  const readyDir = mkdtempSync(path.join(os.tmpdir(), 'faceid-supervisor-'));
  sup.add({ name: 'web', command: process.execPath, args: ['-e', childSource(1500, readyDir)], env: process.env, cwd: ROOT });
  sup.add({ name: 'face', command: process.execPath, args: ['-e', childSource(0, readyDir)], env: process.env, cwd: ROOT });
  sup.add({ name: 'search', command: process.execPath, args: ['-e', childSource(0, readyDir)], env: process.env, cwd: ROOT });
  const first = sup.names().map((n) => sup.pid(n)!);
  await until('the children to handle SIGTERM', 20_000, () => (first.every((pid) => existsSync(path.join(readyDir, String(pid)))) ? true : undefined));
  // What a signal to the process group does: every child gets it, and so does the launcher, which shuts the supervisor down.
  for (const pid of first) process.kill(pid, 'SIGTERM');
  await sup.shutDown([['web']], 5000);
  const status = sup.status();
  t.deepEqual(
    status.map((s) => [s.name, s.restarts, s.state, s.pid]),
    [
      ['web', 0, 'stopped', null],
      ['face', 0, 'stopped', null],
      ['search', 0, 'stopped', null],
    ],
    logs.join(' | '),
  );
  t.deepEqual(first.filter(alive), []);
  t.false(sup.add({ name: 'late', command: process.execPath, args: ['-e', childSource(0)], env: process.env, cwd: ROOT }), 'nothing starts once stopping');
});

test('SIGTERM to the process group of a launcher: web drains, no worker is restarted, nothing outlives the launcher', async (t) => {
  t.timeout(90_000);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'faceid-launcher-'));
  const statusFile = path.join(dir, 'supervisor.json');
  writeFileSync(
    path.join(dir, 'web.mjs'),
    childSource(2500).replace('setTimeout(() => process.exit(0)', "setTimeout(() => (console.log('drained'), process.exit(0))"),
  );
  writeFileSync(path.join(dir, 'worker.mjs'), childSource(0));
  // A layout of small processes, launched by the one launcher as `npm start` and `npm run start:ha` are.
  writeFileSync(
    path.join(dir, 'launch.ts'),
    `import { launch } from ${JSON.stringify(path.join(ROOT, 'platform', 'processes', 'launcher.ts'))};
const proc = (name, file, drainsFirst = false) => ({ name, file: ${JSON.stringify(dir)} + '/' + file, role: name, drainsFirst });
const web = proc('web', 'web.mjs', true);
const face = proc('face', 'worker.mjs');
const search = proc('search', 'worker.mjs');
const copies = [[web, 0], [web, 1], [face, 0], [face, 1], [search, 0]].map(([p, index]) => ({ name: index ? p.name + '-' + (index + 1) : p.name, process: p, index, env: {} }));
launch({ name: 'test', prepare: async () => ({ env: process.env, copies, url: 'http://127.0.0.1:9', release: false }) }, ${JSON.stringify(ROOT)});
`,
  );
  const launcher = spawn(process.execPath, ['--import', 'tsx', path.join(dir, 'launch.ts')], {
    cwd: ROOT,
    detached: true,
    env: {
      ...process.env,
      NODE_ENV: 'development',
      SUPERVISOR_STATUS_FILE: statusFile,
      FACEID_SERVICE_FILE: path.join(dir, 'service.json'),
      RESTART_BACKOFF_INITIAL_MS: '50',
      RESTART_BACKOFF_MAX_MS: '50',
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  launcher.stdout!.on('data', (d: Buffer) => (output += d.toString()));
  launcher.stderr!.on('data', (d: Buffer) => (output += d.toString()));
  const exited = new Promise<number | null>((resolve) => launcher.once('exit', (code) => resolve(code)));
  const status = () => (existsSync(statusFile) ? (JSON.parse(readFileSync(statusFile, 'utf8')) as { processes: ChildStatus[] }).processes : []);
  const seen = new Set<number>();
  try {
    // Every child has its SIGTERM handler.
    await until('the five processes to be ready', 60_000, () => (output.match(/\] ready/g)?.length === 5 ? true : undefined));
    for (const p of status()) seen.add(p.pid!);
    process.kill(-launcher.pid!, 'SIGTERM');
    // Every pid the launcher ever ran, while it stops.
    const watching = setInterval(() => {
      for (const p of status()) if (p.pid) seen.add(p.pid);
    }, 20);
    const code = await Promise.race([exited, sleep(60_000).then(() => 'timeout' as const)]);
    clearInterval(watching);
    t.is(code, 0, output);
    t.deepEqual([...seen].filter(alive), [], `nothing outlives the launcher\n${output}`);
    t.is(seen.size, 5, `no process was started after the signal\n${output}`);
    t.deepEqual(
      status().map((p) => [p.name, p.restarts, p.state]),
      [
        ['web', 0, 'stopped'],
        ['web-2', 0, 'stopped'],
        ['face', 0, 'stopped'],
        ['face-2', 0, 'stopped'],
        ['search', 0, 'stopped'],
      ],
    );
    t.notRegex(output, /restarting in/, output);
    t.is(output.match(/drained/g)?.length, 2, `each web copy finished its drain\n${output}`);
  } finally {
    try {
      process.kill(-launcher.pid!, 'SIGKILL');
    } catch {
      // gone, as expected
    }
  }
});
