/**
 * The test harness runs no retention sweep a test did not ask for. The web process it starts runs the
 * upstream worker in the background (UPSTREAM_WORKER_IN_WEB), and the retention job's first run is
 * immediate (a BullMQ `every` scheduler): on a busy machine that run came after a test had seeded
 * records dated in the past (the analytics and billing reports seed March 2025, older than the 400-day
 * search-log retention) and purged them under it ("dispute: 404 No history entry has this
 * referenceId"). Tests of the sweep ask for it (`retentionSweep: true`).
 */
import test from 'ava';
import { Queue } from 'bullmq';
import { bullPrefix } from '../platform/jobs/contract.js';
import { UPSTREAM_QUEUE } from '../platform/jobs/upstream.js';
import { useHarness } from './helpers/harness.js';
import { newConsumer } from './helpers/principals.js';
import { insertLogs, verifySelfRow } from './support/search-logs.js';

const h = useHarness(test);

test('records a test seeds dated years back are still there once the upstream worker runs: no sweep was scheduled', async (t) => {
  const user = await newConsumer(h);
  const [id] = await insertLogs(h.deps.db, [verifySelfRow({ userId: user.userId, createdAt: new Date('2025-03-11T12:00:00Z') })]);
  const connection = h.deps.redis.duplicate();
  const queue = new Queue(UPSTREAM_QUEUE, { connection, prefix: bullPrefix(h.config.redis.prefix) });
  try {
    // The worker starts in the background: wait until it serves the queue, then give a scheduled run time to land.
    const t0 = Date.now();
    while ((await queue.getWorkersCount()) === 0 && Date.now() - t0 < 30_000) await new Promise((r) => setTimeout(r, 100));
    t.true((await queue.getWorkersCount()) > 0, 'the upstream worker serves its queue');
    await new Promise((r) => setTimeout(r, 1500));
    t.deepEqual(
      (await queue.getJobSchedulers()).map((s) => s.key),
      [],
      'no retention job is scheduled',
    );
    t.truthy(await h.deps.db('searchLogs').where({ id }).first(), 'the seeded log is still there');
  } finally {
    await queue.close();
    connection.disconnect();
  }
});
