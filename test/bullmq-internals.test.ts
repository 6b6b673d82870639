/**
 * The face-path protocol (platform/face-path/README.md) reads three BullMQ internals, which no BullMQ
 * release promises to keep: the marker key that wakes an idle Worker (follow-on.ts writes it), the lock
 * key of an active job and the format of its token (worker-liveness.ts reads the Worker holding a taken
 * job from it). BullMQ is pinned to the exact version they were checked against (package.json); this
 * file runs a real Queue and Worker of that version against Redis and fails when an upgrade changes
 * any of them.
 */
import test from 'ava';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { wakeIdleWorker } from '../platform/face-path/follow-on.js';
import { lockKey, workerIdOfToken } from '../platform/face-path/worker-liveness.js';
import { bullPrefix } from '../platform/jobs/contract.js';
import { testRedisPrefix, TEST_REDIS_URL } from './helpers/db.js';
import { ROOT } from './helpers/harness.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const opened: Redis[] = [];
const connection = () => {
  const c = new Redis(TEST_REDIS_URL, { maxRetriesPerRequest: null });
  opened.push(c);
  return c;
};
test.after.always(() => {
  for (const c of opened) c.disconnect();
});

async function until<T>(what: string, ms: number, get: () => T | undefined | Promise<T | undefined>): Promise<T> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    const v = await get();
    if (v) return v;
    await sleep(20);
  }
  throw new Error(`timed out waiting for ${what}`);
}

test('bullmq is pinned to the exact version installed, the one these internals were checked against', (t) => {
  const wanted = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { dependencies: Record<string, string> }).dependencies.bullmq;
  const installed = (JSON.parse(readFileSync(path.join(ROOT, 'node_modules', 'bullmq', 'package.json'), 'utf8')) as { version: string }).version;
  t.regex(wanted ?? '', /^\d+\.\d+\.\d+$/, 'an exact version, no range: an upgrade is a decision, checked by this file');
  t.is(installed, wanted);
});

test("the marker: an add writes ZADD <queue>:marker 0 '0', as wakeIdleWorker does, and that alone wakes an idle Worker", async (t) => {
  t.timeout(60_000);
  const prefix = testRedisPrefix();
  const name = 'internals-marker';
  const redis = connection();
  const queue = new Queue(name, { connection: connection(), prefix: bullPrefix(prefix) });
  let worker: Worker | undefined;
  try {
    const marker = `${bullPrefix(prefix)}:${name}:marker`;
    t.is(queue.keys.marker, marker);

    // An add writes the marker as wakeIdleWorker does: one member "0" with score 0.
    await queue.add('job', { n: 1 });
    t.deepEqual(await redis.zrange(marker, '0', '-1', 'WITHSCORES'), ['0', '0']);
    await redis.del(marker);
    await wakeIdleWorker(redis, queue);
    t.deepEqual(await redis.zrange(marker, '0', '-1', 'WITHSCORES'), ['0', '0']);

    let processed = 0;
    worker = new Worker(
      name,
      async () => {
        processed++;
      },
      { connection: connection(), prefix: bullPrefix(prefix), drainDelay: 30 },
    );
    // The Worker's blocking connection (BullMQ names its connections after the queue), as Redis lists it.
    const clientName = `${bullPrefix(prefix)}:${Buffer.from(name).toString('base64')}`;
    const blocked = async () => {
      const line = String(await redis.client('LIST'))
        .split('\n')
        .find((l) => l.includes(` name=${clientName} `) && / flags=b /.test(l));
      return line ? { cmd: /\bcmd=(\S+)/.exec(line)?.[1], idle: Number(/\bidle=(\d+)/.exec(line)?.[1]) } : undefined;
    };
    await until('the job to be processed', 20_000, () => processed === 1);
    // Idle, it blocks on the marker (BZPOPMIN, for drainDelay: 30 s here) ...
    const idle = await until('the Worker to wait 2 s on the marker', 20_000, async () => {
      const b = await blocked();
      return b && b.idle >= 2 ? b : undefined;
    });
    t.is(idle.cmd, 'bzpopmin');
    // ... and the marker alone wakes it: it looks for a job, finds none and blocks again at once (its idle
    // time starts again), long before its 30 s.
    await wakeIdleWorker(redis, queue);
    const woken = await until('the Worker to wake on the marker', 5_000, async () => {
      const b = await blocked();
      return b && b.idle === 0 ? b : undefined;
    }).catch(() => undefined);
    t.truthy(woken, 'an idle Worker wakes when the marker is written');
    t.is(processed, 1);
  } finally {
    await worker?.close();
    await queue.obliterate({ force: true }).catch(() => {});
    await queue.close();
    redis.disconnect();
  }
});

test('the lock of an active job is <queue>:<jobId>:lock and its token is <worker id>:<counter>, as worker-liveness reads them', async (t) => {
  t.timeout(60_000);
  const prefix = testRedisPrefix();
  const name = 'internals-lock';
  const redis = connection();
  const queue = new Queue(name, { connection: connection(), prefix: bullPrefix(prefix) });
  let release = () => {};
  const running = new Promise<void>((resolve) => (release = resolve));
  let started = false;
  const worker = new Worker(
    name,
    async () => {
      started = true;
      await running;
    },
    { connection: connection(), prefix: bullPrefix(prefix) },
  );
  try {
    await queue.add('job', {}, { jobId: 'held-job' });
    await until('the job to be active', 20_000, () => started);
    const token = await redis.get(lockKey(prefix, name, 'held-job'));
    t.truthy(token, 'the lock key of an active job holds its token');
    t.regex(token!, /^[^:]+:\d+$/, `token ${token}`);
    t.is(workerIdOfToken(token!), worker.id, 'the token names the Worker holding the job');
    // The key the protocol reads is the one BullMQ builds for the job.
    t.is(lockKey(prefix, name, 'held-job'), `${queue.toKey('held-job')}:lock`);
  } finally {
    release();
    await worker.close();
    await queue.obliterate({ force: true }).catch(() => {});
    await queue.close();
    redis.disconnect();
  }
});
