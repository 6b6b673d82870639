/**
 * `npm start`'s process list and stop timing, from one place each: the Procfile and the `start:<name>`
 * scripts agree with platform/processes/process-list.ts, and the supervisor never kills a process inside its own
 * stop deadline (the web process drains for SHUTDOWN_DRAIN_MS, then closes the rest).
 */
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readdirSync, readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import test from 'ava';
import { loadConfig } from '../processes/config.js';
import { processCopies, procfileText, registerProcessSizing, SERVICE_PROCESSES } from '../platform/processes/process-list.js';
import { supervisorGraceMs, webStopMs, WORKER_STOP_MS } from '../platform/processes/shutdown.js';
import { Supervisor } from '../platform/processes/supervisor.js';
import { ROOT } from './helpers/harness.js';

test('the Procfile is the process list', (t) => {
  t.is(readFileSync(path.join(ROOT, 'Procfile'), 'utf8'), procfileText());
});

test("the Procfile's release runs in production when NODE_ENV is unset, with production's refusals", (t) => {
  const release = /^release: (.*)$/m.exec(readFileSync(path.join(ROOT, 'Procfile'), 'utf8'))![1]!;
  // A platform's environment without NODE_ENV and without production settings; an unreachable database,
  // so that nothing is migrated whatever happens.
  const run = spawnSync('sh', ['-c', release], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, HOME: process.env.HOME, DATABASE_URL: 'postgres://postgres@127.0.0.1:1/unreachable' },
    encoding: 'utf8',
    timeout: 60_000,
  });
  t.not(run.status, 0);
  t.regex(run.stdout + run.stderr, /JWT_PRIVATE_KEY must be set in production/);
});

test('the copies of each process follow the settings of the wing that sizes it (the face and search manifests); one wing sizes a process', (t) => {
  const copiesOf = (env: Record<string, string>) => {
    const c = loadConfig({ NODE_ENV: 'test', ...env });
    return processCopies(
      (p) => p.copies?.(c) ?? 1,
      (p, index) => p.copyEnv?.(c, index) ?? {},
    ).map((copy) => [copy.name, copy.env]);
  };
  t.deepEqual(copiesOf({ FACE_PROCESSES: '3', SEARCH_PROCESSES: '2' }), [
    ['web', {}],
    ['face', {}],
    ['face-2', {}],
    ['face-3', {}],
    ['search', {}],
    ['search-2', {}],
  ]);
  t.deepEqual(
    copiesOf({ FACE_PROCESSES: '1', SEARCH_SHARDS: '2' }).filter(([name]) => String(name).startsWith('search')),
    [
      ['search', { SEARCH_SHARD: '0' }],
      ['search-2', { SEARCH_SHARD: '1' }],
    ],
  );
  t.throws(() => registerProcessSizing('face', 'another-wing', { copies: () => 1 }), { message: /sized by wing face already/ });
});

test('each process of the list has its `npm run start:<name>`', (t) => {
  const scripts = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { scripts: Record<string, string> }).scripts;
  // `exec node --import tsx`, as the Procfile runs them: the `tsx` command would SIGKILL a child busy past 60 ms on a stop signal.
  for (const p of SERVICE_PROCESSES) t.is(scripts[`start:${p.name}`], `NODE_ENV=${'${NODE_ENV:-development}'} exec node --import tsx ${p.file}`, p.name);
});

test('the launcher and its layouts read their settings from the configuration, never from process.env', (t) => {
  // They set their children's environment (environmentWith); what they read themselves comes from platform/config.ts.
  const files = ['scripts/start.ts', 'scripts/start-ha.ts', ...readdirSync(path.join(ROOT, 'platform', 'processes')).map((f) => `platform/processes/${f}`)];
  for (const file of files) t.notRegex(readFileSync(path.join(ROOT, file), 'utf8'), /process\.env\b/, file);
});

test("the supervisor waits beyond the web process's own stop deadline, whatever SHUTDOWN_DRAIN_MS", (t) => {
  for (const env of [{}, { SHUTDOWN_DRAIN_MS: '20000' }, { SHUTDOWN_DRAIN_MS: '0' }, { SHUTDOWN_DRAIN_MS: '60000' }]) {
    const c = loadConfig({ NODE_ENV: 'development', ...env });
    t.true(webStopMs(c) >= c.http.shutdownDrainMs, 'the web process drains for SHUTDOWN_DRAIN_MS');
    t.true(supervisorGraceMs(c) > webStopMs(c), `SHUTDOWN_DRAIN_MS=${c.http.shutdownDrainMs}: supervisor ${supervisorGraceMs(c)} ms, web ${webStopMs(c)} ms`);
    t.true(supervisorGraceMs(c) > WORKER_STOP_MS);
  }
  // The default configuration: a 15 s drain, so the supervisor's SIGKILL comes after 20 s, not at 15.
  t.true(supervisorGraceMs(loadConfig({ NODE_ENV: 'development' })) > 20_000);
});

test('a supervised process that uses its whole stop deadline ends by itself, not by SIGKILL', async (t) => {
  t.timeout(30_000);
  const c = loadConfig({ NODE_ENV: 'development', SHUTDOWN_DRAIN_MS: '300' });
  const deadline = webStopMs(c);
  const readyFile = path.join(mkdtempSync(path.join(os.tmpdir(), 'faceid-stop-deadline-')), 'ready');
  // A child that stops as the web process does (onShutdown with its deadline) and needs nearly all of it.
  const child = `
    const { onShutdown } = await import(${JSON.stringify(path.join(ROOT, 'platform', 'processes', 'shutdown.ts'))});
    const { createLogger } = await import(${JSON.stringify(path.join(ROOT, 'platform', 'logger.ts'))});
    onShutdown(createLogger({ level: 'silent' }), () => new Promise((r) => setTimeout(r, ${deadline - 500})), ${deadline});
    setInterval(() => {}, 1000);
    (await import('node:fs')).writeFileSync(${JSON.stringify(readyFile)}, 'ready');
  `;
  const logs: string[] = [];
  const sup = new Supervisor({
    initialBackoffMs: 100,
    maxBackoffMs: 100,
    stableAfterMs: 60_000,
    crashLoopRestarts: 5,
    crashLoopWindowMs: 60_000,
    log: (m) => logs.push(m),
  });
  sup.add({ name: 'web', command: process.execPath, args: ['--import', 'tsx', '--input-type=module', '-e', child], env: process.env, cwd: ROOT });
  // Signalled once it handles the signal (loading tsx takes seconds on a busy machine).
  for (let i = 0; i < 600 && !existsSync(readyFile); i++) await new Promise((r) => setTimeout(r, 50));
  const t0 = Date.now();
  await sup.stop(['web'], supervisorGraceMs(c));
  const took = Date.now() - t0;
  const status = sup.status()[0]!;
  t.is(status.lastExit?.signal, null, `ended by ${status.lastExit?.signal}; ${logs.join(' | ')}`);
  t.is(status.lastExit?.code, 0);
  t.true(took >= deadline - 600, `it used its stop time (${took} ms)`);
});
