/**
 * Fail fast. With no worker on a queue, or Redis unreachable, a face route answers
 * 503 (`face_engine_unavailable` / `dependency_unavailable`) with Retry-After within a second, without
 * enqueueing; a queue over its bound of waiting work answers 503 with Retry-After too. Before, every
 * such request waited the whole FACE_JOB_TIMEOUT_MS.
 */
import test from 'ava';
import { AppError } from '../platform/errors.js';
import { JobClient } from '../platform/face-path/job-client.js';
import { startSearchRunner, UNREAD_PROBE } from './helpers/search-runner.js';
import { startHarness, type Harness } from './helpers/harness.js';
import { TEST_REDIS_URL, testRedisPrefix } from './helpers/db.js';
import { identifyWithFixture, jobsLeft } from './helpers/face-path.js';
import { newConsumer, newOperator } from './helpers/principals.js';
import { client } from './helpers/http.js';
import { FACE_ENGINE_VERSION } from '../platform/face/face-models.js';
import sharp from 'sharp';
import { startPrivateRedis } from '../scripts/lib/private-services.js';

const ADMISSION = { maxWaiting: 2, sampleMs: 500, checkTimeoutMs: 800, retryAfterSeconds: 5 };

let h: Harness;
test.before(async () => {
  // The SPEC's default job timeout: the 503 must not wait for it.
  h = await startHarness({ env: { FACE_JOB_TIMEOUT_MS: '10000', FAIL_FAST: 'true' } });
});
test.after.always(async () => {
  await h?.stop();
});

test('no face worker: /identify answers 503 face_engine_unavailable with Retry-After within a second, nothing enqueued, one SearchLog row', async (t) => {
  const operator = await newOperator(h);
  const { res, elapsed } = await identifyWithFixture(h, operator.token);
  t.is(res.status, 503, res.text);
  t.is(res.body.error, 'face_engine_unavailable');
  t.is(res.body.outcome, 'face_engine_unavailable');
  t.is(res.headers.get('retry-after'), '5');
  // The gate itself answers in milliseconds (the JobClient tests below hold it to 1 s); this request also
  // writes its SearchLog row: far below the 10 s job timeout it used to wait.
  t.true(elapsed < 3000, `answered after ${elapsed} ms`);
  t.is(await jobsLeft(h, 'liveness'), 0, 'nothing was enqueued');
  t.is((await h.deps.db('searchLogs').where({ operatorId: operator.operatorId })).length, 1);
});

test('no face worker: /verify/self answers 503 with Retry-After before its upload is decoded', async (t) => {
  const me = await newConsumer(h);
  await h.deps.repos.embeddings.upsert(
    me.userId,
    Array.from({ length: 512 }, (_, i) => Math.sin(i + 1)),
    'link_nin',
    FACE_ENGINE_VERSION,
  );
  // Bytes that are no image: an answer 400 `invalid_image` would mean the upload was decoded before
  // the gate was asked.
  const garbage = await client(h.url).post('/verify/self', { token: me.token, form: { image: { data: Buffer.from('not an image at all') } } });
  t.is(garbage.status, 503, garbage.text);
  t.is(garbage.body.error, 'face_engine_unavailable');
  t.is(garbage.headers.get('retry-after'), '5');
  // A real photo (4 megapixels): answered by the gate, not after its decoding.
  const photo = await sharp({
    create: { width: 2000, height: 2000, channels: 3, background: { r: 0, g: 0, b: 0 }, noise: { type: 'gaussian', mean: 128, sigma: 25 } },
  })
    .jpeg({ quality: 85 })
    .toBuffer();
  const started = Date.now();
  const res = await client(h.url).post('/verify/self', { token: me.token, form: { image: { data: photo } } });
  const elapsed = Date.now() - started;
  t.is(res.status, 503, res.text);
  t.is(res.body.error, 'face_engine_unavailable');
  t.true(elapsed < 3000, `answered after ${elapsed} ms`);
  t.is(await jobsLeft(h, 'liveness'), 0, 'nothing was enqueued');
});

function echoWorker(prefix: string, hold?: Promise<void>) {
  return startSearchRunner(TEST_REDIS_URL, prefix, async (payload) => {
    await hold;
    return { op: 'compare', score: 1, ms: 0, echoed: (payload as { userId: string }).userId };
  });
}

test('a worker that starts is used at once; a queue over its waiting bound answers 503 with Retry-After', async (t) => {
  const prefix = testRedisPrefix();
  const jobs = new JobClient({ redisUrl: TEST_REDIS_URL, redisPrefix: prefix, timeoutMs: 5000, admission: ADMISSION });
  try {
    const none = await t.throwsAsync(jobs.run('search', { op: 'compare', ...UNREAD_PROBE, userId: 'u' }));
    t.is((none as AppError).code, 'face_engine_unavailable');
    t.is((none as AppError).retryAfter, 5);
    t.like((none as AppError).details, { reason: 'no_worker' });

    // A worker that has just started is seen by the very next call (an unhealthy sample is never reused).
    let release!: () => void;
    const hold = new Promise<void>((r) => (release = r));
    const worker = await echoWorker(prefix, hold);
    // One job held by the worker (active), two waiting: the bound (2) is reached.
    const held = [jobs.run('search', { op: 'compare', ...UNREAD_PROBE, userId: 'a' })];
    await new Promise((r) => setTimeout(r, 300));
    held.push(jobs.run('search', { op: 'compare', ...UNREAD_PROBE, userId: 'b' }), jobs.run('search', { op: 'compare', ...UNREAD_PROBE, userId: 'c' }));
    await new Promise((r) => setTimeout(r, 700)); // past sampleMs: the next call samples again
    const started = Date.now();
    const full = await t.throwsAsync(jobs.run('search', { op: 'compare', ...UNREAD_PROBE, userId: 'd' }));
    t.true(Date.now() - started < 1000);
    t.is((full as AppError).code, 'face_engine_unavailable');
    t.like((full as AppError).details, { reason: 'overloaded', waiting: 2 });
    t.is((full as AppError).retryAfter, 5);
    release();
    const results = (await Promise.all(held)) as unknown as { echoed: string }[];
    t.deepEqual(
      results.map((r) => r.echoed),
      ['a', 'b', 'c'],
      'the admitted jobs all ran',
    );
    await worker.close();
  } finally {
    await jobs.close();
  }
});

test('Redis unreachable: 503 dependency_unavailable with Retry-After within a second; back when Redis is', async (t) => {
  const redis = await startPrivateRedis();
  const prefix = testRedisPrefix();
  const jobs = new JobClient({ redisUrl: redis.url, redisPrefix: prefix, timeoutMs: 10_000, admission: ADMISSION });
  const worker = await startSearchRunner(redis.url, prefix, () => ({ op: 'compare', score: 1, ms: 0 }));
  try {
    t.like(await jobs.run('search', { op: 'compare', ...UNREAD_PROBE, userId: 'u' }), { score: 1 });
    await redis.stop();
    await new Promise((r) => setTimeout(r, 300));
    for (let i = 0; i < 3; i++) {
      const started = Date.now();
      const err = await t.throwsAsync(jobs.run('search', { op: 'compare', ...UNREAD_PROBE, userId: 'u' }));
      t.true(Date.now() - started < 1000, `answered after ${Date.now() - started} ms`);
      t.is((err as AppError).code, 'dependency_unavailable');
      t.is((err as AppError).retryAfter, 5);
    }
    await redis.start();
    let ok = false;
    for (let i = 0; i < 50 && !ok; i++) {
      ok = await jobs.run('search', { op: 'compare', ...UNREAD_PROBE, userId: 'u' }).then(
        () => true,
        () => false,
      );
      if (!ok) await new Promise((r) => setTimeout(r, 200));
    }
    t.true(ok, 'jobs run again once Redis is back');
  } finally {
    await worker.close().catch(() => {});
    await jobs.close();
    await redis.stop();
  }
});

test('workers gone after a healthy sample was taken: a stage nobody takes answers 503 no_worker within a second or so, not at its deadline', async (t) => {
  const prefix = testRedisPrefix();
  // A healthy sample is reused for 5 s here: the workers die inside its lifetime, as when every face
  // process is killed right after a request was admitted on a fresh sample.
  const jobs = new JobClient({
    redisUrl: TEST_REDIS_URL,
    redisPrefix: prefix,
    timeoutMs: 10_000,
    workerLivenessMs: 1500,
    admission: { ...ADMISSION, sampleMs: 5000 },
  });
  const worker = await echoWorker(prefix);
  try {
    t.like(await jobs.run('search', { op: 'compare', ...UNREAD_PROBE, userId: 'u' }), { echoed: 'u' });
    await worker.close();
    const started = Date.now();
    const err = await t.throwsAsync(jobs.run('search', { op: 'compare', ...UNREAD_PROBE, userId: 'u' }));
    const elapsed = Date.now() - started;
    t.is((err as AppError).code, 'face_engine_unavailable');
    t.like((err as AppError).details, { queue: 'search', reason: 'no_worker' });
    t.is((err as AppError).retryAfter, 5);
    t.true(elapsed < 1500, `answered after ${elapsed} ms (the deadline is 10 s)`);
    const counts = await jobs.counts('search');
    t.is((counts.waiting ?? 0) + (counts.prioritized ?? 0), 0, 'the job was withdrawn');
  } finally {
    await worker.close().catch(() => {});
    await jobs.close();
  }
});
