/** `npm run migrate` up and down both work, on a fresh database. */
import test from 'ava';
import knexFactory from 'knex';
import { createDb } from '../platform/database/db.js';
import { TEST_PG_BASE } from './helpers/db.js';
import { randomBytes } from 'node:crypto';

test('migrations run up, down to nothing, and up again', async (t) => {
  const name = `faceid_m_${randomBytes(4).toString('hex')}`;
  const adminUrl = new URL(TEST_PG_BASE);
  const admin = knexFactory({ client: 'pg', connection: adminUrl.toString(), pool: { min: 0, max: 1 } });
  await admin.raw(`CREATE DATABASE "${name}"`);
  const url = new URL(TEST_PG_BASE);
  url.pathname = `/${name}`;
  const db = createDb(url.toString(), 1);
  try {
    const tables = async () =>
      (await db.raw("SELECT table_name::text AS name FROM information_schema.tables WHERE table_schema = 'public' AND table_name NOT LIKE 'knex_%'")).rows
        .map((r: { name: string }) => r.name)
        .sort();
    await db.migrate.latest();
    const up = await tables();
    for (const expected of [
      'users',
      'nin_links',
      'bvn_links',
      'canonical_embeddings',
      'embedding_changes',
      'operators',
      'sessions',
      'refresh_tokens',
      'search_logs',
      'disputes',
      'audit_events',
      'preferences',
      'registry_persons',
      'webhook_endpoints',
      'webhook_events',
      'webhook_deliveries',
      'webhook_delivery_attempts',
    ]) {
      t.true(up.includes(expected), `${expected} exists`);
    }
    const cols = (await db.raw("SELECT column_name::text AS col, data_type::text AS type FROM information_schema.columns WHERE table_name = 'search_logs'"))
      .rows;
    t.true(cols.some((c: { col: string; type: string }) => c.col === 'latency_ms' && c.type === 'jsonb'));
    t.true(cols.some((c: { col: string }) => c.col === 'escalated_at'));
    await db.migrate.rollback(undefined, true);
    t.deepEqual(await tables(), []);
    await db.migrate.latest();
    t.deepEqual(await tables(), up);
  } finally {
    await db.destroy();
    await admin.raw(`DROP DATABASE IF EXISTS "${name}" WITH (FORCE)`);
    await admin.destroy();
  }
});
