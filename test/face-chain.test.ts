/**
 * Stages that follow on (JobClient.start `followOns`, JobContext.followOn): a worker adds the next
 * stage of a request itself, and the API awaits every stage's result.
 *
 * The face models run on a process's main thread, so while a face process runs one stage its own
 * workers of the other queues cannot act. A follow-on job must still go to another process's idle
 * worker at once, not wait for the busy process (platform/face-path/follow-on.ts `wakeIdleWorker`).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import test from 'ava';
import { Queue } from 'bullmq';
import { loadConfig } from '../processes/config.js';
import { ADD_WRITTEN_AFTER_STEPS } from '../platform/face-path/follow-on.js';
import { bullPrefix, QUEUE_OPTIONS } from '../platform/jobs/contract.js';
import { JOB_CONTRACTS } from '../platform/jobs/index.js';
import { bullConnection, redisTarget } from '../platform/redis/redis.js';
import { JobClient } from '../platform/face-path/job-client.js';
import { AppError } from '../platform/errors.js';
import { createRedis } from '../platform/redis/redis.js';
import { TEST_REDIS_URL, testRedisPrefix } from './helpers/db.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const prefix = testRedisPrefix();
const jobs = new JobClient({ redisUrl: TEST_REDIS_URL, redisPrefix: prefix, timeoutMs: 5000 });
const redis = createRedis(TEST_REDIS_URL);
const children: ChildProcess[] = [];

test.after.always(async () => {
  for (const c of children) c.kill('SIGTERM');
  await jobs.close();
  const keys = await redis.keys(`${prefix}:*`);
  if (keys.length) await redis.del(...keys);
  redis.disconnect();
});

/** Starts test/helpers/chain-worker.ts in its own process; resolves when it serves its queues. */
function startWorker(role: 'busy' | 'idle'): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(HERE, 'helpers', 'chain-worker.ts')], {
    env: { ...process.env, CHAIN_ROLE: role, CHAIN_BUSY_MS: '1000', REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: prefix },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  return new Promise((resolve, reject) => {
    child.on('exit', (code) => reject(new Error(`chain worker (${role}) exited with ${code}`)));
    child.stdout!.on('data', (d: Buffer) => {
      if (d.toString().includes('ready')) resolve(child);
    });
  });
}

const livenessJob = (embedId: string) => ({
  imageRef: randomUUID(),
  mode: 'single' as const,
  resultSalt: 'k',
  handOffMinLiveness: 0,
  embedNext: { jobId: embedId, resultSalt: 'k2' },
});

test.serial('a follow-on stage runs at once on an idle process while the process that added it is busy', async (t) => {
  // The busy process starts first: its embed worker is the first in line for the add's wake-up,
  // which it cannot act on while its liveness stage holds the main thread.
  const busy = await startWorker('busy');
  const idle = await startWorker('idle');
  for (let i = 0; i < 4; i++) {
    const embedId = randomUUID();
    const run = await jobs.start('liveness', livenessJob(embedId), { followOns: [{ queue: 'embed', jobId: embedId }] });
    const order: string[] = [];
    const [, embedded] = await Promise.all([
      run.result('liveness', run.jobId).then(() => order.push('liveness')),
      run.result('embed', embedId).then((r) => {
        order.push('embed');
        return r as unknown as { pid: number };
      }),
    ]);
    t.deepEqual(order, ['embed', 'liveness'], `round ${i + 1}: the embed stage answered while the liveness stage still ran`);
    t.is(embedded.pid, idle.pid!, `round ${i + 1}: on the idle process`);
  }
  t.not(busy.pid, idle.pid);
});

test.serial('a follow-on stage that never comes answers 503 face_engine_unavailable at the deadline', async (t) => {
  // A search stage is awaited but nobody adds it (no embed job names it).
  const searchId = randomUUID();
  const embedId = randomUUID();
  const run = await jobs.start('liveness', livenessJob(embedId), {
    timeoutMs: 1500,
    followOns: [
      { queue: 'embed', jobId: embedId },
      { queue: 'search', jobId: searchId },
    ],
  });
  const started = Date.now();
  const err = await t.throwsAsync(run.result('search', searchId));
  t.true(err instanceof AppError && err.code === 'face_engine_unavailable' && err.status === 503);
  t.true(Date.now() - started < 3000);
  // The stages that did answer are still readable before the deadline; after it, nothing is awaited.
  await t.throwsAsync(run.result('embed', 'not-a-stage'), { message: /no stage "embed"/ });
});

test.serial('BullMQ writes an add within the promise steps the wake-up waits for', async (t) => {
  // The wake-up of a follow-on must follow the add on the connection (platform/face-path/follow-on.ts):
  // count the steps until the add is on the wire (ioredis keeps a written command in its commandQueue
  // until Redis answers it).
  const stepsPrefix = `${prefix}-steps`;
  const connection = bullConnection(redisTarget(loadConfig({ NODE_ENV: 'test', REDIS_URL: TEST_REDIS_URL, REDIS_PREFIX: stepsPrefix }).redis));
  const queue = new Queue('embed', { connection, prefix: bullPrefix(stepsPrefix), ...QUEUE_OPTIONS });
  try {
    await queue.waitUntilReady();
    const written = () => (connection as unknown as { commandQueue: { length: number } }).commandQueue.length;
    for (let round = 0; round < 3; round++) {
      const before = written();
      const added = JOB_CONTRACTS.embed.enqueue(
        queue,
        { deadlineAt: Date.now() + 5000, replyTo: `${stepsPrefix}:replies`, payload: { alignedFaceRef: 'r', alignedFaceSalt: 's', resultSalt: 't' } },
        randomUUID(),
      );
      let steps = 0;
      while (written() === before && steps <= ADD_WRITTEN_AFTER_STEPS) {
        await undefined;
        steps++;
      }
      t.true(steps <= ADD_WRITTEN_AFTER_STEPS, `round ${round + 1}: the add was written after ${steps} promise steps`);
      await added;
    }
  } finally {
    await queue.obliterate({ force: true }).catch(() => {});
    await queue.close();
    connection.disconnect();
  }
});
