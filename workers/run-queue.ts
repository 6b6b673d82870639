/**
 * The one way a worker process serves queues of shared/jobs: face, search and upstream alike.
 *
 * - Typed handler map: the handler of queue Q receives Q's payload and returns Q's result.
 * - Refuses to start (throws, before any connection) when a queue it is asked to serve has no
 *   handler, when a handler names an unknown queue, or when asked for an undeclared queue: a missing
 *   wire fails at boot, not in production.
 * - Reads each job as its queue's contract declares (shared/jobs/contract.ts): an awaited job is a
 *   deadline envelope, a deferred job is its bare payload (retried as its contract's options say).
 * - Skips an awaited job whose `deadlineAt` has passed when it is picked up (the API has already
 *   answered 503 and withdrawn it, or tried to): the handler never runs, the payload (an image, an
 *   embedding) is wiped from Redis at once, and the job is failed as `expired` without retry. So a
 *   withdrawn or timed-out request never runs later.
 * - An awaited job's result (or the error it threw) goes to the caller's reply list
 *   (shared/jobs/reply.ts), not to BullMQ: the job completes with no return value, so no result ever
 *   enters the events stream.
 * - Face outcomes are results (handlers return them); a thrown error is an engine fault: the job
 *   fails once (awaited contracts say attempts: 1) and the waiting request answers 503 at once.
 * - Never logs a payload or a result (images and embeddings).
 */
import { Queue, UnrecoverableError, Worker, type Job } from 'bullmq';
import type { Config } from '../shared/config.js';
import { bullPrefix } from '../shared/job-client.js';
import { AWAITED_QUEUE_NAMES, JOB_CONTRACTS, QUEUE_NAMES, type AwaitedQueueName, type JobContracts, type JobEnvelope, type QueueName } from '../shared/jobs/index.js';
import { QUEUE_OPTIONS, type AwaitedJobContract } from '../shared/jobs/contract.js';
import { pushReply } from '../shared/jobs/reply.js';
import type { Logger } from '../shared/logger.js';
import { bullConnection, redisTarget, type Redis } from '../shared/redis.js';

export interface JobContext {
  job: Job;
  /** Epoch ms after which nobody awaits the result (Infinity for a deferred job: nobody awaits it). */
  deadlineAt: number;
  /** A non-blocking connection of the runner's, for what a handler keeps in Redis beside its result. */
  redis: Redis;
  /**
   * Adds the next stage of the same request to an awaited queue, under the id its caller chose and
   * awaits (JobClient.start `followOns`), with this job's deadline and reply list: the stage's output
   * goes on without a trip through the API. Sent on `redis`, so a value the handler wrote there first
   * is in Redis before the job is. Then wakes one more idle worker of that queue (wakeIdleWorker).
   * Only for an awaited job (a deferred one has nobody to reply to).
   */
  followOn<F extends AwaitedQueueName>(queue: F, jobId: string, payload: JobContracts[F]['payload']): Promise<void>;
}

export type JobHandler<Q extends QueueName> = (
  payload: JobContracts[Q]['payload'],
  ctx: JobContext,
) => Promise<JobContracts[Q]['result']>;

export type HandlerMap<Q extends QueueName> = { [K in Q]: JobHandler<K> };

export interface QueueStats {
  /** Handler invocations. */
  started: number;
  completed: number;
  failed: number;
  /** Jobs picked up after their deadline: not run. */
  skippedExpired: number;
}

export interface RunQueuesOptions {
  logger: Logger;
  /** Jobs one process runs at once, per queue. */
  concurrency: number;
  /** Clock (tests). */
  now?: () => number;
}

export interface QueueRunner<Q extends QueueName> {
  readonly queues: readonly Q[];
  readonly stats: Record<Q, QueueStats>;
  /** A plain handle on a served queue (for re-enqueueing through its contract); opened on first use. */
  queue(name: Q): Queue;
  close(): Promise<void>;
}

/** Why a job was not run: its deadline had passed when a worker picked it up. */
export const EXPIRED_REASON = 'expired: picked up after its deadline; not run';

/** Checks the handler map against the declared queues; throws on any gap. Exported for tests. */
export function checkHandlers(queues: readonly string[], handlers: Record<string, unknown>): void {
  const problems: string[] = [];
  if (queues.length === 0) problems.push('no queue to serve');
  for (const q of queues) {
    if (!(QUEUE_NAMES as readonly string[]).includes(q)) problems.push(`queue "${q}" is not declared in shared/jobs`);
    if (typeof handlers[q] !== 'function') problems.push(`queue "${q}" has no handler`);
  }
  for (const name of Object.keys(handlers)) {
    if (!queues.includes(name)) problems.push(`handler for "${name}", which this process does not serve`);
  }
  if (problems.length) throw new Error(`refusing to start the queue worker: ${problems.join('; ')}`);
}

export async function runQueues<Q extends QueueName>(
  config: Config,
  queues: readonly Q[],
  handlers: HandlerMap<Q>,
  opts: RunQueuesOptions,
): Promise<QueueRunner<Q>> {
  checkHandlers(queues, handlers as Record<string, unknown>);
  const now = opts.now ?? Date.now;
  const prefix = bullPrefix(config.redisPrefix);
  const stats = Object.fromEntries(queues.map((q) => [q, { started: 0, completed: 0, failed: 0, skippedExpired: 0 }])) as Record<Q, QueueStats>;
  const workers: Worker[] = [];
  const connections: ReturnType<typeof bullConnection>[] = [];
  // Replies and handlers' side values: one non-blocking connection (each Worker blocks its own).
  const replyConnection = bullConnection(redisTarget(config));
  replyConnection.on('error', (e) => opts.logger.debug({ err: e.message }, 'redis connection error'));
  connections.push(replyConnection);

  // Handles on any queue (re-enqueueing a deferred job, adding a follow-on stage), on the non-blocking
  // connection that handlers write their side values on: commands on one connection apply in order.
  const handles = new Map<QueueName, Queue>();
  const queueHandle = (name: QueueName): Queue => {
    let handle = handles.get(name);
    if (!handle) {
      handle = new Queue(name, { connection: replyConnection, prefix, ...QUEUE_OPTIONS });
      // Redis outages are reported by /health; without a listener BullMQ prints every reconnect error.
      handle.on('error', () => {});
      handles.set(name, handle);
    }
    return handle;
  };
  const followOn = async <F extends AwaitedQueueName>(name: F, jobId: string, envelope: JobEnvelope<F>): Promise<void> => {
    const contract = JOB_CONTRACTS[name] as AwaitedJobContract<F, JobContracts[F]['payload']>;
    if (contract.delivery !== 'awaited') throw new Error(`queue "${name}" is deferred: nobody awaits a follow-on there`);
    const handle = queueHandle(name);
    const added = contract.enqueue(handle, envelope, jobId);
    // The extra wake-up must reach Redis after the add (a worker woken before the job exists finds
    // nothing and blocks again, behind the busy one) and before this process blocks in its next model
    // run. BullMQ writes the add after a few promise steps, all run before any setImmediate callback;
    // the models' runs are themselves setImmediate callbacks (onnxruntime-node), queued after this one.
    const woken = new Promise<void>((resolve, reject) => setImmediate(() => wakeIdleWorker(replyConnection, handle).then(resolve, reject)));
    await Promise.all([added, woken]);
  };

  for (const queue of queues) {
    const handler = handlers[queue] as JobHandler<Q>;
    const log = opts.logger.child({ queue });
    const processor = async (job: Job) => {
      if (JOB_CONTRACTS[queue].delivery === 'deferred') {
        if (job.data == null || typeof job.data !== 'object') throw new UnrecoverableError(`malformed job "${job.name}" on queue "${queue}"`);
        stats[queue].started++;
        return handler(job.data as JobContracts[Q]['payload'], {
          job,
          deadlineAt: Number.POSITIVE_INFINITY,
          redis: replyConnection,
          followOn: () => Promise.reject(new Error('a deferred job has no caller to follow on for')),
        });
      }
      const envelope = job.data as Partial<JobEnvelope<Q>> | undefined;
      if (job.name !== queue || !envelope || typeof envelope.deadlineAt !== 'number' || typeof envelope.replyTo !== 'string' || envelope.payload == null) {
        throw new UnrecoverableError(`malformed job "${job.name}" on queue "${queue}"`);
      }
      const { deadlineAt } = envelope;
      if (now() > deadlineAt) {
        stats[queue].skippedExpired++;
        // Wipe the payload (an image, an embedding) now rather than when the job ages out.
        await job.updateData({ deadlineAt, payload: null }).catch(() => {});
        log.info({ jobId: job.id, lateByMs: now() - deadlineAt }, 'job skipped: picked up after its deadline');
        throw new UnrecoverableError(EXPIRED_REASON);
      }
      stats[queue].started++;
      const replyTo = envelope.replyTo;
      let result: unknown;
      try {
        result = await handler(envelope.payload as JobContracts[Q]['payload'], {
          job,
          deadlineAt,
          redis: replyConnection,
          followOn: (next, jobId, payload) => followOn(next, jobId, { deadlineAt, replyTo, payload }),
        });
      } catch (e) {
        // The caller answers 503 at once instead of at its deadline; the job still fails in BullMQ.
        await pushReply(replyConnection, replyTo, { id: job.id!, ok: false, error: (e as Error)?.message ?? String(e) }).catch(() => {});
        throw e;
      }
      // A reply that cannot be pushed (Redis gone) fails the job; its caller times out with a 503.
      await pushReply(replyConnection, replyTo, { id: job.id!, ok: true, result });
      return null;
    };
    const connection = bullConnection(redisTarget(config));
    connection.on('error', (e) => log.debug({ err: e.message }, 'redis connection error'));
    connections.push(connection);
    const worker = new Worker(queue, processor, {
      connection,
      prefix,
      concurrency: opts.concurrency,
      autorun: true,
    });
    worker.on('completed', () => {
      stats[queue].completed++;
    });
    worker.on('failed', (job, err) => {
      if (err?.message === EXPIRED_REASON) return;
      stats[queue].failed++;
      log.error({ jobId: job?.id, err: err?.message }, 'job failed');
    });
    worker.on('error', (err) => log.warn({ err: err.message }, 'queue worker error'));
    workers.push(worker);
  }
  // The handles a follow-on may need are ready before the first job: opening one costs Redis round
  // trips that a stage adding its follow-on must not wait for (test/face-chain.test.ts).
  await Promise.all([...workers.map((w) => w.waitUntilReady()), ...AWAITED_QUEUE_NAMES.map((q) => queueHandle(q).waitUntilReady())]);
  opts.logger.info({ queues, concurrency: opts.concurrency }, 'serving queues');

  return {
    queues,
    stats,
    queue: (name: Q) => queueHandle(name),
    close: async () => {
      // Lets running jobs finish, takes no new ones.
      await Promise.allSettled(workers.map((w) => w.close()));
      await Promise.allSettled([...handles.values()].map((q) => q.close()));
      await Promise.allSettled(connections.map((c) => c.quit().catch(() => c.disconnect())));
    },
  };
}

/**
 * Wakes one more idle worker of a queue after a follow-on job was added.
 *
 * Why: a worker process runs the face models on its main thread, so while it runs one stage its own
 * workers of the other queues cannot act. Redis hands the wake-up of an add (BullMQ's marker, one
 * `ZADD <queue>:marker 0 "0"` in its add script) to the worker that has been blocked longest; when
 * that is the adding process's own worker, the follow-on job would wait until the process's stage is
 * done, although another process sat idle. A second marker wakes the next blocked worker: whichever
 * of the two moves the job to active first runs it; the other finds nothing and blocks again (one
 * empty `moveToActive`). The marker key is BullMQ's (`queue.keys.marker`); test/face-chain.test.ts
 * fails if a BullMQ upgrade changes how workers are woken.
 */
export async function wakeIdleWorker(redis: Redis, queue: Queue): Promise<void> {
  await redis.zadd(queue.keys.marker, 0, '0');
}
