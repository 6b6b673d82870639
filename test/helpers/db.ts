/**
 * Each test file gets its own PostgreSQL database, cloned from a migrated template (named after a hash
 * of the migrations, so a changed migration makes a new template), and its own Redis key prefix.
 */
import { createHash, randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import knexFactory, { type Knex } from 'knex';
import pg from 'pg';
import { MIGRATIONS_DIR, createDb } from '../../platform/database/db.js';

export const TEST_PG_BASE = process.env.TEST_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
export const TEST_REDIS_URL = process.env.TEST_REDIS_URL ?? 'redis://127.0.0.1:6379';

function dbUrl(name: string): string {
  const u = new URL(TEST_PG_BASE);
  u.pathname = `/${name}`;
  return u.toString();
}

function migrationsHash(): string {
  const h = createHash('sha256');
  for (const f of readdirSync(MIGRATIONS_DIR).sort()) h.update(f).update(readFileSync(path.join(MIGRATIONS_DIR, f)));
  return h.digest('hex').slice(0, 10);
}

function admin(): Knex {
  return knexFactory({ client: 'pg', connection: { connectionString: dbUrl('postgres'), connectionTimeoutMillis: 5000 }, pool: { min: 0, max: 1 } });
}

async function ensureTemplate(a: Knex): Promise<string> {
  const name = `faceid_tpl_${migrationsHash()}`;
  const exists = async () => (await a.raw('SELECT 1 FROM pg_database WHERE datname = ?', [name])).rows.length > 0;
  if (await exists()) return name;
  // Serialise template creation across the test processes with a session-level advisory lock.
  const lock = new pg.Client({ connectionString: dbUrl('postgres') });
  await lock.connect();
  try {
    await lock.query('SELECT pg_advisory_lock(727274)');
    if (await exists()) return name;
    const building = `${name}_building`;
    await a.raw(`DROP DATABASE IF EXISTS "${building}"`);
    await a.raw(`CREATE DATABASE "${building}"`);
    const db = createDb(dbUrl(building), 1);
    try {
      await db.migrate.latest();
    } finally {
      await db.destroy();
    }
    await a.raw(`ALTER DATABASE "${building}" RENAME TO "${name}"`);
    return name;
  } finally {
    await lock.end();
  }
}

export interface TestDatabase {
  name: string;
  url: string;
  drop(): Promise<void>;
}

export async function createTestDatabase(): Promise<TestDatabase> {
  const a = admin();
  try {
    const template = await ensureTemplate(a);
    const name = `faceid_t_${randomBytes(5).toString('hex')}`;
    for (let attempt = 0; ; attempt++) {
      try {
        await a.raw(`CREATE DATABASE "${name}" TEMPLATE "${template}"`);
        break;
      } catch (e) {
        // Another process cloning the same template at the same instant.
        if (attempt > 20 || !/being accessed by other users/.test(String((e as Error).message))) throw e;
        await new Promise((r) => setTimeout(r, 100 + Math.random() * 200));
      }
    }
    return {
      name,
      url: dbUrl(name),
      drop: async () => {
        const b = admin();
        try {
          await b.raw(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
        } finally {
          await b.destroy();
        }
      },
    };
  } finally {
    await a.destroy();
  }
}

export const testRedisPrefix = () => `t_${randomBytes(4).toString('hex')}`;

/** The login role the tests connect as to run under `faceid_app` (a deployment's `faceid_web`). */
export const TEST_APP_LOGIN = 'faceid_test_app';

/**
 * `url` as the least-privilege application role: a LOGIN member of `faceid_app` (cluster-wide,
 * created once, tolerant of another test process creating it at the same instant; trust auth).
 */
export async function appRoleUrl(url: string): Promise<string> {
  const a = admin();
  try {
    await a.raw(`
      DO $$
      BEGIN
        IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = '${TEST_APP_LOGIN}') THEN
          CREATE ROLE ${TEST_APP_LOGIN} LOGIN IN ROLE faceid_app;
        END IF;
      EXCEPTION WHEN duplicate_object OR unique_violation THEN NULL;
      END $$`);
  } finally {
    await a.destroy();
  }
  const u = new URL(url);
  u.username = TEST_APP_LOGIN;
  u.password = '';
  return u.toString();
}
