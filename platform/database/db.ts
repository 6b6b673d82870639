/** PostgreSQL access: one knex per process, bound to objection's models. */
import knexFactory, { type Knex } from 'knex';
import { Model, knexSnakeCaseMappers } from 'objection';
import path from 'node:path';
import pg from 'pg';
import { PROJECT_ROOT } from '../paths.js';

// A DATE column is a calendar date, not an instant: keep it as 'YYYY-MM-DD' instead of a local-midnight Date.
pg.types.setTypeParser(pg.types.builtins.DATE, (v: string) => v);

export const MIGRATIONS_DIR = path.resolve(PROJECT_ROOT, 'migrations');

/** `bindModels: false` leaves objection's models alone (a worker sharing a process with the API, in tests). */
export function createDb(databaseUrl: string, poolMax = 10, opts: { bindModels?: boolean } = {}): Knex {
  const db = knexFactory({
    client: 'pg',
    connection: { connectionString: databaseUrl, connectionTimeoutMillis: 3000 },
    pool: { min: 0, max: poolMax, acquireTimeoutMillis: 5000 },
    acquireConnectionTimeout: 5000,
    // Columns are snake_case in PostgreSQL and camelCase in code.
    ...knexSnakeCaseMappers(),
    migrations: { directory: MIGRATIONS_DIR, loadExtensions: ['.ts'], tableName: 'knex_migrations' },
  });
  if (opts.bindModels !== false) Model.knex(db);
  return db;
}

export async function migrateLatest(db: Knex): Promise<string[]> {
  const [, applied] = (await db.migrate.latest()) as [number, string[]];
  return applied;
}

/** Creates the database named in the URL when it does not exist (used by start-up and tests). */
export async function ensureDatabase(databaseUrl: string): Promise<void> {
  const url = new URL(databaseUrl);
  const name = decodeURIComponent(url.pathname.replace(/^\//, ''));
  if (!/^[A-Za-z0-9_]+$/.test(name)) throw new Error(`Refusing unusual database name ${JSON.stringify(name)}`);
  url.pathname = '/postgres';
  const admin = knexFactory({ client: 'pg', connection: { connectionString: url.toString(), connectionTimeoutMillis: 3000 }, pool: { min: 0, max: 1 } });
  try {
    const { rows } = await admin.raw('SELECT 1 FROM pg_database WHERE datname = ?', [name]);
    if (rows.length === 0) {
      try {
        await admin.raw(`CREATE DATABASE "${name}"`);
      } catch (e) {
        // Two processes racing to create it: the loser sees duplicate_database.
        if ((e as { code?: string }).code !== '42P04') throw e;
      }
    }
  } finally {
    await admin.destroy();
  }
}
