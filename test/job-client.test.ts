/** The awaited-job helper: result, removal from Redis, and timeout with withdrawal when no worker runs. */
import test from 'ava';
import { JobClient } from '../platform/face-path/job-client.js';
import { bullPrefix } from '../platform/jobs/contract.js';
import { createRedis } from '../platform/redis/redis.js';
import { replyListKey } from '../platform/face-path/replies.js';
import type { QueueRunner } from '../platform/worker-runtime/run-queue.js';
import { startSearchRunner, UNREAD_PROBE } from './helpers/search-runner.js';
import { TEST_REDIS_URL, testRedisPrefix } from './helpers/db.js';
import { AppError } from '../platform/errors.js';
import '../processes/wings.js';
import { BANK_ACCOUNT_QUEUE, bankAccountConfirmJobId, enqueueBankAccountConfirm } from '../features/accounts/job.js';
import { startPrivateRedis } from '../scripts/lib/private-services.js';

const prefix = testRedisPrefix();
const jobs = new JobClient({ redisUrl: TEST_REDIS_URL, redisPrefix: prefix, timeoutMs: 800 });
const redis = createRedis(TEST_REDIS_URL);
const workers: QueueRunner<'search'>[] = [];

test.after.always(async () => {
  await Promise.all(workers.map((w) => w.close()));
  await jobs.close();
  const keys = await redis.keys(`${prefix}:*`);
  if (keys.length) await redis.del(...keys);
  redis.disconnect();
});

/** The reply goes out just before the worker's last step (BullMQ's moveToFinished, which deletes the job). */
async function gone(key: string): Promise<boolean> {
  for (let i = 0; i < 50; i++) {
    if ((await redis.exists(key)) === 0) return true;
    await new Promise((r) => setTimeout(r, 20));
  }
  return false;
}

async function startWorker(onJob: Parameters<typeof startSearchRunner>[2], concurrency = 1) {
  const w = await startSearchRunner(TEST_REDIS_URL, prefix, onJob, concurrency);
  workers.push(w);
  return w;
}

test.serial('with no worker running the call fails with 503 face_engine_unavailable in time and the job is withdrawn', async (t) => {
  const started = Date.now();
  const err = await t.throwsAsync(jobs.run('search', { op: 'compare', ...UNREAD_PROBE, userId: 'u' }, { timeoutMs: 800 }));
  const elapsed = Date.now() - started;
  t.true(err instanceof AppError);
  t.is((err as AppError).code, 'face_engine_unavailable');
  t.is((err as AppError).status, 503);
  t.true(elapsed >= 750 && elapsed < 3000, `answered after ${elapsed} ms`);
  const counts = await jobs.counts('search');
  t.is(counts.waiting + counts.prioritized + counts.delayed + counts.active, 0, 'no job left in the queue');

  // A worker that starts afterwards never sees the withdrawn job.
  let ran = 0;
  const w = await startWorker(() => {
    ran++;
    return { op: 'compare', score: 1, ms: 0 };
  });
  await new Promise((r) => setTimeout(r, 1000));
  t.is(ran, 0);
  await w.close();
});

test.serial('a result comes back on the reply list, never through the events stream, and the job is removed from Redis', async (t) => {
  let seenId: string | undefined;
  const w = await startWorker((payload, { job }) => {
    seenId = job?.id;
    return { op: 'compare', score: 0.5, ms: 1, echoed: (payload as { userId: string }).userId };
  });
  const result = await jobs.run('search', { op: 'compare', ...UNREAD_PROBE, userId: 'abc' });
  t.like(result as object, { op: 'compare', score: 0.5, echoed: 'abc' });
  t.truthy(seenId);
  t.true(await gone(`${bullPrefix(prefix)}:search:${seenId}`), 'the job hash is gone');
  // The events stream says the job completed, without its result.
  const events = (await redis.xrange(`${bullPrefix(prefix)}:search:events`, '-', '+')).map(([, f]) => f.join(' '));
  t.true(
    events.some((e) => e.includes('completed') && e.includes(seenId!)),
    'a completed event',
  );
  t.false(
    events.some((e) => e.includes('echoed') || e.includes('0.5')),
    'no result in the events stream',
  );
  // The reply was read off the list: nothing waits there.
  t.deepEqual((await redis.keys(replyListKey(prefix, '*'))).length, 0, 'no reply left on a list');
  await w.close();
});

test.serial('a job whose worker throws answers 503 face_engine_unavailable at once, and the job is removed from Redis', async (t) => {
  let seenId: string | undefined;
  const w = await startWorker((_, { job }) => {
    seenId = job?.id;
    throw new Error('engine fault');
  });
  const started = Date.now();
  const err = await t.throwsAsync(jobs.run('search', { op: 'compare', ...UNREAD_PROBE, userId: 'u' }, { timeoutMs: 5000 }));
  t.is((err as AppError).code, 'face_engine_unavailable');
  t.true(Date.now() - started < 2000, 'answered on the failure, not on the timeout');
  t.truthy(seenId);
  t.true(await gone(`${bullPrefix(prefix)}:search:${seenId}`), 'the job hash is gone');
  const counts = await jobs.counts('search');
  t.is(counts.waiting + counts.active + counts.failed + counts.completed, 0, 'nothing left in any state');
  await w.close();
});

test.serial('concurrent jobs each get their own result', async (t) => {
  const w = await startWorker((payload) => ({ op: 'compare', score: 0, ms: 0, echoed: (payload as { userId: string }).userId }), 4);
  const ids = Array.from({ length: 20 }, (_, i) => `u${i}`);
  const results = await Promise.all(ids.map((userId) => jobs.run('search', { op: 'compare', ...UNREAD_PROBE, userId })));
  t.deepEqual(
    results.map((r) => (r as unknown as { echoed: string }).echoed),
    ids,
  );
  const jobKeys = async () => (await redis.keys(`${bullPrefix(prefix)}:search:*`)).filter((k) => !/:(events|meta|id|marker|stalled-check)$/.test(k));
  for (let i = 0; i < 50 && (await jobKeys()).length > 0; i++) await new Promise((r) => setTimeout(r, 20));
  t.deepEqual(await jobKeys(), [], 'no job hash or job list entry left');
  await w.close();
});

test.serial('a deferred queue is not awaited: run refuses it, and its jobs go through the contract with the plain queue handle', async (t) => {
  await t.throwsAsync(jobs.run(BANK_ACCOUNT_QUEUE, { userId: 'u', requestedAt: new Date().toISOString() }), {
    message: /queue "bank-account-confirmations" is deferred/,
  });
  const requestedAt = new Date();
  await enqueueBankAccountConfirm(jobs.queue(BANK_ACCOUNT_QUEUE), 'u', requestedAt, 60_000);
  const job = await jobs.queue(BANK_ACCOUNT_QUEUE).getJob(bankAccountConfirmJobId('u', requestedAt));
  t.like(job?.opts, { attempts: 5, delay: 60_000 });
  t.deepEqual(job?.data, { userId: 'u', requestedAt: requestedAt.toISOString() });
});

test.serial(
  'a deadline that passes while Redis is silent (its host cut off: no answer, no reset) is answered at the deadline, not when Redis answers again',
  async (t) => {
    t.timeout(30_000);
    const silent = await startPrivateRedis();
    const client = new JobClient({ redisUrl: silent.url, redisPrefix: prefix, timeoutMs: 1500 });
    const pid = silent.pid()!;
    try {
      await client.queue('search').waitUntilReady();
      const started = Date.now();
      // No worker: the job waits for its deadline. Redis goes silent before it passes.
      const answer = client.run('search', { op: 'compare', ...UNREAD_PROBE, userId: 'u' }).then(
        () => 'answered 200',
        (e: unknown) => e,
      );
      await new Promise((r) => setTimeout(r, 500));
      process.kill(pid, 'SIGSTOP');
      const err = await Promise.race([answer, new Promise((r) => setTimeout(() => r('no answer within 8 s'), 8000))]);
      const elapsed = Date.now() - started;
      t.true(err instanceof AppError, String(err));
      t.like(err, { code: 'face_engine_unavailable', status: 503 });
      t.true(elapsed < 2500, `answered ${elapsed} ms after it was sent, with a 1500 ms deadline`);
    } finally {
      process.kill(pid, 'SIGCONT');
      await client.close();
      await silent.stop();
    }
  },
);
