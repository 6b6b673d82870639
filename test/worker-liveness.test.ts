/**
 * A request whose stage was running on a worker process that is killed answers 503
 * `face_engine_unavailable` with Retry-After within 3 s, not at its job deadline (10 s here); BullMQ
 * alone would notice the stalled job only after 30 s (platform/face-path/worker-liveness.ts). A stage on
 * a live process that holds its main thread longer than the liveness period (as a model run does) is
 * not mistaken for a dead one.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import test from 'ava';
import { AppError } from '../platform/errors.js';
import { JobClient } from '../platform/face-path/job-client.js';
import { bullWorkerKey, livenessKey, runnerKey } from '../platform/face-path/worker-liveness.js';
import { bullPrefix } from '../platform/jobs/contract.js';
import { createRedis } from '../platform/redis/redis.js';
import { TEST_REDIS_URL, testRedisPrefix } from './helpers/db.js';

const HERE = path.dirname(fileURLToPath(import.meta.url));
const JOB_DEADLINE_MS = 10_000;
const LIVENESS_MS = 1500;
const ADMISSION = { maxWaiting: 50, sampleMs: 500, checkTimeoutMs: 800, retryAfterSeconds: 5 };
const redis = createRedis(TEST_REDIS_URL);
const children: ChildProcess[] = [];
const prefixes: string[] = [];

test.after.always(async () => {
  for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGTERM');
  for (const prefix of prefixes) {
    const keys = await redis.keys(`${prefix}:*`);
    if (keys.length) await redis.del(...keys);
  }
  redis.disconnect();
});

/** test/helpers/chain-worker.ts in its own process (the project's runner); resolves when it serves. */
function startWorker(prefix: string, role: 'busy' | 'idle', busyMs: number): Promise<ChildProcess> {
  const child = spawn(process.execPath, ['--import', 'tsx', path.join(HERE, 'helpers', 'chain-worker.ts')], {
    env: {
      ...process.env,
      CHAIN_ROLE: role,
      CHAIN_BUSY_MS: String(busyMs),
      REDIS_URL: TEST_REDIS_URL,
      REDIS_PREFIX: prefix,
      WORKER_LIVENESS_MS: String(LIVENESS_MS),
    },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  children.push(child);
  return new Promise((resolve, reject) => {
    child.once('exit', (code, signal) => reject(new Error(`chain worker (${role}) exited with ${code ?? signal}`)));
    child.stdout!.on('data', (d: Buffer) => {
      if (d.toString().includes('ready')) resolve(child);
    });
  });
}

function client(admission: typeof ADMISSION | null = ADMISSION) {
  const prefix = testRedisPrefix();
  prefixes.push(prefix);
  return {
    prefix,
    jobs: new JobClient({
      redisUrl: TEST_REDIS_URL,
      redisPrefix: prefix,
      timeoutMs: JOB_DEADLINE_MS,
      admission: admission ?? undefined,
      workerLivenessMs: LIVENESS_MS,
    }),
  };
}

const livenessJob = (embedId: string) => ({
  imageRef: randomUUID(),
  mode: 'single' as const,
  resultSalt: 'k',
  handOffMinLiveness: 0,
  embedNext: { jobId: embedId, resultSalt: 'k2' },
});

async function until(check: () => Promise<boolean>, timeoutMs: number): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() > end) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 25));
  }
}

test.serial('a stage whose worker process is killed answers 503 with Retry-After within 3 s, every stage of the request with it', async (t) => {
  const { prefix, jobs } = client();
  try {
    // Its liveness stage holds the main thread far past the kill, as a model run would.
    const worker = await startWorker(prefix, 'busy', 8000);
    const embedId = randomUUID();
    const run = await jobs.start('liveness', livenessJob(embedId), { followOns: [{ queue: 'embed', jobId: embedId }] });
    const liveness = run.result('liveness', run.jobId);
    const embed = run.result('embed', embedId);
    // The stage runs on that process: its runner key names it, and its liveness key is kept.
    await until(async () => (await redis.get(runnerKey(prefix, run.jobId))) !== null, 3000);
    const processId = (await redis.get(runnerKey(prefix, run.jobId)))!;
    t.is(await redis.exists(livenessKey(prefix, processId)), 1);
    // BullMQ's lock on the job names the Worker holding it, and that Worker is named as this process.
    const token = (await redis.get(`${bullPrefix(prefix)}:liveness:${run.jobId}:lock`))!;
    t.is(await redis.get(bullWorkerKey(prefix, token.slice(0, token.lastIndexOf(':')))), processId);

    const killedAt = Date.now();
    worker.kill('SIGKILL');
    const lost = await t.throwsAsync(liveness);
    const elapsed = Date.now() - killedAt;
    t.true(lost instanceof AppError);
    t.is((lost as AppError).code, 'face_engine_unavailable');
    t.is((lost as AppError).status, 503);
    t.is((lost as AppError).retryAfter, 5);
    t.like((lost as AppError).details, { queue: 'liveness', reason: 'worker_lost' });
    t.log(`answered ${elapsed} ms after the kill`);
    t.true(elapsed < 3000, `answered ${elapsed} ms after the kill (job deadline ${JOB_DEADLINE_MS} ms)`);
    // The follow-on stage nobody will run answers with it, not at the deadline.
    const embedErr = await t.throwsAsync(embed);
    t.is((embedErr as AppError).code, 'face_engine_unavailable');
    t.true(Date.now() - killedAt < 3000);
  } finally {
    await jobs.close();
  }
});

test.serial('a stage on a live process that holds its main thread past the liveness period is answered, not given up', async (t) => {
  const { prefix, jobs } = client();
  try {
    await startWorker(prefix, 'busy', 2 * LIVENESS_MS);
    const idle = await startWorker(prefix, 'idle', 0);
    const embedId = randomUUID();
    const started = Date.now();
    const run = await jobs.start('liveness', livenessJob(embedId), { followOns: [{ queue: 'embed', jobId: embedId }] });
    const [liveness, embedded] = await Promise.all([run.result('liveness', run.jobId), run.result('embed', embedId)]);
    t.like(liveness, { ok: false, code: 'no_face' });
    t.is((embedded as unknown as { pid: number }).pid, idle.pid!);
    t.true(Date.now() - started >= 2 * LIVENESS_MS, 'the stage held its process past the liveness period');
    t.deepEqual(await redis.keys(runnerKey(prefix, '*')), [], 'a stage that answered leaves no runner key behind');
  } finally {
    await jobs.close();
  }
});

test.serial('a stage taken by a process that is killed before starting it (its lock held, no runner key yet) answers 503 within 3 s', async (t) => {
  // Without admission: no process serves the search queue here, and the job is to stay where it is.
  const { prefix, jobs } = client(null);
  try {
    const worker = await startWorker(prefix, 'idle', 0);
    const names = await redis.keys(bullWorkerKey(prefix, '*'));
    t.is(names.length, 1, 'the process named its one Worker before taking a job');
    const bullWorkerId = names[0]!.slice(bullWorkerKey(prefix, '').length);
    const processId = (await redis.get(names[0]!))!;
    t.is(await redis.exists(livenessKey(prefix, processId)), 1);

    // A search job (no process here serves that queue) taken by that Worker as BullMQ takes one: its
    // lock holds the Worker's token; the handler has not run, so no runner key names the process.
    const run = await jobs.start('search', { op: 'knn', k: 1, minSeq: '0', embeddingRef: randomUUID(), embeddingSalt: 's' });
    await redis.set(`${bullPrefix(prefix)}:search:${run.jobId}:lock`, `${bullWorkerId}:7`, 'PX', 30_000);
    const search = run.result('search', run.jobId);
    let settled = false;
    search.then(
      () => (settled = true),
      () => (settled = true),
    );
    // While the process lives, the taken stage is waited for.
    await new Promise((r) => setTimeout(r, 2 * LIVENESS_MS));
    t.false(settled, 'a stage held by a live process is not given up');

    const killedAt = Date.now();
    worker.kill('SIGKILL');
    const lost = await t.throwsAsync(search);
    const elapsed = Date.now() - killedAt;
    t.is((lost as AppError).code, 'face_engine_unavailable');
    t.is((lost as AppError).status, 503);
    t.truthy((lost as AppError).retryAfter);
    t.like((lost as AppError).details, { queue: 'search', reason: 'worker_lost' });
    t.log(`answered ${elapsed} ms after the kill`);
    t.true(elapsed < 3000, `answered ${elapsed} ms after the kill (job deadline ${JOB_DEADLINE_MS} ms)`);
  } finally {
    await jobs.close();
  }
});

/** A TCP relay to the test Redis whose connections can be cut: the API's side of a Redis fail-over. */
async function redisRelay(): Promise<{ url: string; cut: () => void; close: () => Promise<void> }> {
  const target = new URL(TEST_REDIS_URL);
  const sockets = new Set<net.Socket>();
  const server = net.createServer((client) => {
    const upstream = net.connect(Number(target.port || 6379), target.hostname);
    for (const socket of [client, upstream]) {
      sockets.add(socket);
      socket.on('close', () => sockets.delete(socket));
      socket.on('error', () => {});
    }
    client.on('close', () => upstream.destroy());
    upstream.on('close', () => client.destroy());
    client.pipe(upstream).pipe(client);
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const url = new URL(TEST_REDIS_URL);
  url.hostname = '127.0.0.1';
  url.port = String((server.address() as net.AddressInfo).port);
  const cut = () => {
    for (const socket of sockets) socket.destroy();
  };
  return { url: url.toString(), cut, close: () => new Promise<void>((resolve) => (cut(), server.close(() => resolve()))) };
}

test.serial("a liveness key that lapses just after the API's own Redis connection failed is put down to Redis: 503 dependency_unavailable", async (t) => {
  const prefix = testRedisPrefix();
  prefixes.push(prefix);
  const relay = await redisRelay();
  const jobs = new JobClient({ redisUrl: relay.url, redisPrefix: prefix, timeoutMs: JOB_DEADLINE_MS, admission: ADMISSION, workerLivenessMs: LIVENESS_MS });
  let worker: ChildProcess | undefined;
  try {
    worker = await startWorker(prefix, 'busy', 8000);
    const embedId = randomUUID();
    const run = await jobs.start('liveness', livenessJob(embedId), { followOns: [{ queue: 'embed', jobId: embedId }] });
    const liveness = run.result('liveness', run.jobId);
    await until(async () => (await redis.get(runnerKey(prefix, run.jobId))) !== null, 3000);
    // As in a fail-over: the API's connections drop, and the worker's liveness key lapses although its
    // process lives on (stopped here, as its beat is while Redis has no master).
    worker.kill('SIGSTOP');
    relay.cut();
    const lost = await t.throwsAsync(liveness);
    t.is((lost as AppError).code, 'dependency_unavailable');
    t.is((lost as AppError).status, 503);
    t.is((lost as AppError).retryAfter, 5);
    t.like((lost as AppError).details, { queue: 'liveness', reason: 'queue_store_failover' });
  } finally {
    worker?.kill('SIGCONT');
    await jobs.close();
    await relay.close();
  }
});
