/**
 * The layouts with search shards (SPEC 14.3): `npm start` with SEARCH_SHARDS=N runs one search process
 * per shard; `start:ha` (and `--hosts`) two replicas of every shard, the two on different copies (hosts).
 * And the shard of a user: the same hash in the service and in PostgreSQL.
 */
import test from 'ava';
import pg from 'pg';
import { loadConfig } from '../../processes/config.js';
import { shardOf, shardSql } from '../../platform/jobs/search-shards.js';
import { haCopies, haSearchCopies } from '../../scripts/start-ha.js';
import { oneMachineCopies } from '../../scripts/start.js';
import { extraSearchParts } from '../../scripts/lib/ha/hosts-layout.js';
import { TEST_PG_BASE } from '../helpers/db.js';

test('npm start with SEARCH_SHARDS=3: one search process per shard, each told its shard', (t) => {
  const cfg = loadConfig({ NODE_ENV: 'development', FACE_PROCESSES: '1', SEARCH_SHARDS: '3' });
  const search = oneMachineCopies(cfg).filter((c) => c.process.name === 'search');
  t.deepEqual(
    search.map((c) => [c.name, c.env]),
    [
      ['search', { SEARCH_SHARD: '0' }],
      ['search-2', { SEARCH_HEALTH_PORT: '0', SEARCH_SHARD: '1' }],
      ['search-3', { SEARCH_HEALTH_PORT: '0', SEARCH_SHARD: '2' }],
    ],
  );
  // One shard: SEARCH_PROCESSES replicas of the whole index, no shard setting.
  const one = oneMachineCopies(loadConfig({ NODE_ENV: 'development', SEARCH_PROCESSES: '2' })).filter((c) => c.process.name === 'search');
  t.deepEqual(
    one.map((c) => c.env),
    [{}, { SEARCH_HEALTH_PORT: '0' }],
  );
});

test('start:ha with SEARCH_SHARDS=2: two replicas of every shard, on different copies (hosts search-1..4)', (t) => {
  const cfg = loadConfig({ NODE_ENV: 'development', SEARCH_SHARDS: '2' });
  t.is(haSearchCopies(cfg), 4);
  const search = haCopies({ web: [1, 2], face: [3, 4], search: [5, 6, 7, 8] }, cfg).filter((c) => c.process.name === 'search');
  t.deepEqual(
    search.map((c) => [c.name, c.index, c.env.SEARCH_SHARD]),
    [
      ['search', 0, '0'],
      ['search-2', 1, '1'],
      ['search-3', 2, '0'],
      ['search-4', 3, '1'],
    ],
  );
  t.deepEqual(extraSearchParts(4), ['search-3', 'search-4']);
  t.deepEqual(extraSearchParts(2), []);
  t.is(haSearchCopies(loadConfig({ NODE_ENV: 'development' })), 2);
});

test('the shard of a user id is the same in PostgreSQL as in the service, and spreads ids evenly', async (t) => {
  const client = new pg.Client({ connectionString: TEST_PG_BASE });
  await client.connect();
  try {
    const r = await client.query<{ id: string; s3: string; s5: string }>(
      `SELECT id::text, ${shardSql('id').replace('?', '$1')} AS s3, ${shardSql('id').replace('?', '$2')} AS s5 FROM (SELECT gen_random_uuid() AS id FROM generate_series(1, 3000)) x`,
      [3, 5],
    );
    const counts = [0, 0, 0];
    for (const row of r.rows) {
      t.is(Number(row.s3), shardOf(row.id, 3));
      t.is(Number(row.s5), shardOf(row.id, 5));
      counts[shardOf(row.id, 3)]!++;
    }
    for (const c of counts) t.true(c > 800 && c < 1200, `3000 ids over 3 shards: ${counts.join(', ')}`);
    // Upper-case text is the same id.
    t.is(shardOf(r.rows[0]!.id.toUpperCase(), 5), shardOf(r.rows[0]!.id, 5));
  } finally {
    await client.end();
  }
});
