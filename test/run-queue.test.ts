/**
 * platform/worker-runtime/run-queue.ts: a worker refuses to start with a missing or stray handler; deferred jobs run through it
 * too, and so do the stages of a follow-on list (platform/face-path/list-taker.ts).
 */
import test from 'ava';
import { loadConfig } from '../processes/config.js';
import { BANK_ACCOUNT_QUEUE, enqueueBankAccountConfirm, type BankAccountConfirmJob } from '../features/accounts/job.js';
import { createRedis } from '../platform/redis/redis.js';
import { createLogger } from '../platform/logger.js';
import { runQueues, type HandlerMap, type QueueRunner } from '../platform/worker-runtime/run-queue.js';
import { TEST_REDIS_URL, testRedisPrefix } from './helpers/db.js';
import { followOnListKey } from '../platform/jobs/contract.js';
import { livenessKey, runnerKey } from '../platform/face-path/worker-liveness.js';

const config = loadConfig({ NODE_ENV: 'test', REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: testRedisPrefix() });
const opts = { logger: createLogger({ level: 'silent' }), concurrency: 1 };

test('a declared queue without a handler, or a handler for a queue not served, refuses to start', async (t) => {
  const missing = { liveness: async () => ({ ok: false, code: 'no_face', faceCount: 0, ms: 0 }) } as unknown as HandlerMap<'liveness' | 'embed'>;
  await t.throwsAsync(runQueues(config, ['liveness', 'embed'], missing, opts), { message: /queue "embed" has no handler/ });

  const stray = {
    search: async () => ({ op: 'compare', score: null, ms: 0 }),
    embed: async () => ({ ok: false, code: 'invalid_image', ms: 0 }),
  } as unknown as HandlerMap<'search'>;
  await t.throwsAsync(runQueues(config, ['search'], stray, opts), { message: /handler for "embed", which this process does not serve/ });

  await t.throwsAsync(runQueues(config, ['nope' as 'search'], { nope: async () => null } as unknown as HandlerMap<'search'>, opts), {
    message: /not declared in platform\/jobs/,
  });
});

test("a deferred job (a wing's bankAccount confirmation) is served by the same runner: its bare payload, after its delay, once per job id", async (t) => {
  const seen: { payload: BankAccountConfirmJob; at: number }[] = [];
  const runner = await runQueues(
    config,
    [BANK_ACCOUNT_QUEUE],
    {
      [BANK_ACCOUNT_QUEUE]: async (payload) => {
        seen.push({ payload, at: Date.now() });
        return { applied: true };
      },
    },
    opts,
  );
  const redis = createRedis(TEST_REDIS_URL);
  try {
    const requestedAt = new Date();
    const enqueuedAt = Date.now();
    await enqueueBankAccountConfirm(runner.queue(BANK_ACCOUNT_QUEUE), 'user-1', requestedAt, 300);
    await enqueueBankAccountConfirm(runner.queue(BANK_ACCOUNT_QUEUE), 'user-1', requestedAt, 300); // same job id: a no-op
    for (let i = 0; i < 100 && seen.length === 0; i++) await new Promise((r) => setTimeout(r, 50));
    await new Promise((r) => setTimeout(r, 500)); // a second job, were there one, would have run by now
    t.is(seen.length, 1);
    t.deepEqual(seen[0]!.payload, { userId: 'user-1', requestedAt: requestedAt.toISOString() });
    t.true(seen[0]!.at - enqueuedAt >= 250, `ran ${seen[0]!.at - enqueuedAt} ms after the enqueue`);
    t.deepEqual(runner.stats[BANK_ACCOUNT_QUEUE], { started: 1, completed: 1, failed: 0, skippedExpired: 0 });
  } finally {
    await runner.close();
    const keys = await redis.keys(`${config.redis.prefix}:*`);
    if (keys.length) await redis.del(...keys);
    redis.disconnect();
  }
});

test('a runner takes no job while its process says it cannot serve one, and takes them again once it can', async (t) => {
  // A prefix of its own: the other test's runner serves the same queue meanwhile.
  const config = loadConfig({ NODE_ENV: 'test', REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: testRedisPrefix() });
  let can = false;
  const seen: number[] = [];
  const runner = await runQueues(
    config,
    [BANK_ACCOUNT_QUEUE],
    {
      [BANK_ACCOUNT_QUEUE]: async () => {
        seen.push(Date.now());
        return { applied: true };
      },
    },
    { ...opts, canTakeJobs: () => can },
  );
  const redis = createRedis(TEST_REDIS_URL);
  try {
    await enqueueBankAccountConfirm(runner.queue(BANK_ACCOUNT_QUEUE), 'user-2', new Date(), 0);
    await new Promise((r) => setTimeout(r, 1500)); // ready to run at once: left in the queue
    t.is(seen.length, 0, 'a job was taken while the process could not serve it');
    const canAt = Date.now();
    can = true;
    for (let i = 0; i < 100 && seen.length === 0; i++) await new Promise((r) => setTimeout(r, 50));
    t.is(seen.length, 1);
    t.true(seen[0]! - canAt < 2000, `taken ${seen[0]! - canAt} ms after the process could serve`);
  } finally {
    await runner.close();
    const keys = await redis.keys(`${config.redis.prefix}:*`);
    if (keys.length) await redis.del(...keys);
    redis.disconnect();
  }
});

test('a job that reaches a runner once its process cannot serve it goes back to the queue for another process', async (t) => {
  const config = loadConfig({ NODE_ENV: 'test', REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: testRedisPrefix() });
  // `can` turns false only after the first look (the runner takes jobs, its fetch blocks in Redis):
  // the job then reaches it through that fetch, past the pause.
  let can = true;
  const served: string[] = [];
  const handler = (who: string) => ({
    [BANK_ACCOUNT_QUEUE]: async () => {
      served.push(who);
      return { applied: true };
    },
  });
  const first = await runQueues(config, [BANK_ACCOUNT_QUEUE], handler('unable'), { ...opts, canTakeJobs: () => can });
  const redis = createRedis(TEST_REDIS_URL);
  let second: QueueRunner<typeof BANK_ACCOUNT_QUEUE> | undefined;
  try {
    can = false;
    await enqueueBankAccountConfirm(first.queue(BANK_ACCOUNT_QUEUE), 'user-3', new Date(), 0); // at once, before the pause is seen
    await new Promise((r) => setTimeout(r, 1000));
    t.deepEqual(served, [], 'the process that could not serve ran it');
    second = await runQueues(config, [BANK_ACCOUNT_QUEUE], handler('able'), opts);
    for (let i = 0; i < 100 && served.length === 0; i++) await new Promise((r) => setTimeout(r, 50));
    t.deepEqual(served, ['able']);
  } finally {
    await first.close();
    await second?.close();
    const keys = await redis.keys(`${config.redis.prefix}:*`);
    if (keys.length) await redis.del(...keys);
    redis.disconnect();
  }
});

test("a stage another process put on a queue's follow-on list is served with its reply and its runner named; one taken late is skipped", async (t) => {
  const config = loadConfig({ NODE_ENV: 'test', REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: testRedisPrefix() });
  let release!: () => void;
  const held = new Promise<void>((r) => (release = r));
  const seen: string[] = [];
  const runner = await runQueues(
    config,
    ['search'],
    {
      search: async (payload) => {
        seen.push((payload as { userId: string }).userId);
        await held;
        return { op: 'compare', score: 0.25, ms: 1 };
      },
    },
    opts,
  );
  const redis = createRedis(TEST_REDIS_URL);
  const replyTo = `${config.redis.prefix}:jobs:reply:test`;
  const stage = (id: string, deadlineAt: number) =>
    JSON.stringify({ id, deadlineAt, replyTo, payload: { op: 'compare', userId: id, embeddingRef: 'r', embeddingSalt: 's' } });
  try {
    await redis.lpush(followOnListKey(config.redis.prefix, 'search'), stage('late', Date.now() - 1));
    await redis.lpush(followOnListKey(config.redis.prefix, 'search'), stage('on-time', Date.now() + 5000));
    for (let i = 0; i < 100 && seen.length === 0; i++) await new Promise((r) => setTimeout(r, 20));
    t.deepEqual(seen, ['on-time'], 'the late stage was skipped, the other taken');
    // While it runs, its runner key names this process, whose liveness key is kept: a caller whose
    // stage's process dies answers at once (platform/face-path/worker-liveness.ts).
    const processId = await redis.get(runnerKey(config.redis.prefix, 'on-time'));
    t.truthy(processId);
    t.is(await redis.exists(livenessKey(config.redis.prefix, processId!)), 1);
    release();
    const reply = await redis.blpop(replyTo, 3);
    t.deepEqual(JSON.parse(reply![1]), { id: 'on-time', ok: true, result: { op: 'compare', score: 0.25, ms: 1 } });
    t.is(await redis.llen(replyTo), 0, 'no reply for the late stage');
    t.is(await redis.exists(runnerKey(config.redis.prefix, 'on-time')), 0, 'the runner key goes with the reply');
    t.is(await redis.exists(followOnListKey(config.redis.prefix, 'search')), 0, 'nothing left on the list');
    t.like(runner.stats.search, { started: 1, completed: 1, skippedExpired: 1 });
  } finally {
    release();
    await runner.close();
    const keys = await redis.keys(`${config.redis.prefix}:*`);
    if (keys.length) await redis.del(...keys);
    redis.disconnect();
  }
});
