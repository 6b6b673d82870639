/**
 * The one way a worker process serves queues of shared/jobs: face, search and upstream alike.
 *
 * - Typed handler map: the handler of queue Q receives Q's payload and returns Q's result.
 * - Refuses to start (throws, before any connection) when a queue it is asked to serve has no
 *   handler, when a handler names an unknown queue, or when asked for an undeclared queue: a missing
 *   wire fails at boot, not in production.
 * - Reads each job as its queue's contract declares (platform/jobs/contract.ts): an awaited job is a
 *   deadline envelope, a deferred job is its bare payload (retried as its contract's options say).
 * - Serves an awaited job by the face-path protocol (platform/face-path/serve-awaited.ts): a job picked
 *   up after its deadline is skipped and wiped, the result (or the error) goes to the caller's reply
 *   list, and a handler may add the request's next stage (JobContext.followOn).
 * - Face outcomes are results (handlers return them); a thrown error is an engine fault: the job
 *   fails once (awaited contracts say attempts: 1) and the waiting request answers 503 at once.
 * - Never logs a payload or a result (images and embeddings).
 */
import { Queue, UnrecoverableError, WaitingError, Worker, type Job } from 'bullmq';
import type { Config } from '../config.js';
import { randomUUID } from 'node:crypto';
import { EXPIRED_REASON, serveAwaitedJob, serveStage, type AnswerInPlace, type FollowOn } from '../face-path/serve-awaited.js';
import { takeFollowOns, type ListTaker } from '../face-path/list-taker.js';
import { BULL_WORKER_NAME_SECONDS, bullWorkerKey, LivenessBeat } from '../face-path/worker-liveness.js';
import { AWAITED_QUEUE_NAMES, JOB_CONTRACTS, QUEUE_NAMES, type JobContracts, type QueueName } from '../jobs/index.js';
import { bullPrefix, followOnListKey, QUEUE_OPTIONS } from '../jobs/contract.js';
import type { Logger } from '../logger.js';
import { bullConnection, redisTarget, type Redis } from '../redis/redis.js';

export interface JobContext {
  /** The BullMQ job; none for a stage taken from a follow-on list (platform/face-path/list-taker.ts). */
  job?: Job;
  /** Epoch ms after which nobody awaits the result (Infinity for a deferred job: nobody awaits it). */
  deadlineAt: number;
  /** A non-blocking connection of the runner's, for what a handler keeps in Redis beside its result. */
  redis: Redis;
  /**
   * Adds the next stage of the same request to an awaited queue, under the id its caller chose and
   * awaits (JobClient.start `followOns`), with this job's deadline and reply list: the stage's output
   * goes on without a trip through the API. Sent on `redis`, so a value the handler wrote there first
   * is in Redis before the job is. Then wakes one more idle worker of that queue
   * (platform/face-path/follow-on.ts `wakeIdleWorker`).
   * Only for an awaited job (a deferred one has nobody to reply to).
   */
  followOn: FollowOn;
  /**
   * Answers a later stage of the same request run here without its own job (its reply goes with this
   * job's): platform/face-path/serve-awaited.ts `AnswerInPlace`. Only for an awaited job.
   */
  answer: AnswerInPlace;
}

export type JobHandler<Q extends QueueName> = (payload: JobContracts[Q]['payload'], ctx: JobContext) => Promise<JobContracts[Q]['result']>;

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
  /**
   * Whether this process can serve a job now (checked every TAKE_CHECK_MS): while it says no, the
   * process takes no new job and leaves them to the other processes of the queue (the jobs it runs
   * go on). A search replica whose own link to PostgreSQL is not answering would hold every job it
   * took until its deadline.
   */
  canTakeJobs?: () => boolean;
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

/** Checks the handler map against the declared queues; throws on any gap. Exported for tests. */
export function checkHandlers(queues: readonly string[], handlers: Record<string, unknown>): void {
  const problems: string[] = [];
  if (queues.length === 0) problems.push('no queue to serve');
  for (const q of queues) {
    if (!(QUEUE_NAMES as readonly string[]).includes(q)) problems.push(`queue "${q}" is not declared in platform/jobs`);
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
  const conns = new RunnerConnections(config, opts.logger);
  const stats = Object.fromEntries(queues.map((q) => [q, { started: 0, completed: 0, failed: 0, skippedExpired: 0 }])) as Record<Q, QueueStats>;
  // A process serving awaited jobs says it is alive before it takes one: its callers watch it
  // (platform/face-path/worker-liveness.ts) and answer at once if it dies under their stage.
  const beat = queues.some((q) => JOB_CONTRACTS[q].delivery === 'awaited')
    ? await LivenessBeat.start(redisTarget(config.redis), config.redis.prefix, randomUUID(), config.queues.workerLivenessMs)
    : undefined;
  const runner = beat && { processId: beat.processId, redisPrefix: config.redis.prefix };
  const workers = queues.map((queue) => serveQueue(queue, handlers[queue] as JobHandler<Q>, stats[queue], conns, config, { ...opts, runner, served: queues }));
  // Each Worker is named (its id -> this process) before it takes a job: a job it has taken but not
  // yet started is then traced to this process through the job's lock (worker-liveness.ts).
  const nameWorkers = () =>
    Promise.all(workers.map((w) => conns.redis.set(bullWorkerKey(config.redis.prefix, w.id), beat!.processId, 'EX', BULL_WORKER_NAME_SECONDS)));
  if (beat)
    await nameWorkers().catch((err: Error) =>
      opts.logger.warn({ err: err.message }, 'queue workers not named: a stage taken but not started is answered at its deadline'),
    );
  const renaming = beat ? setInterval(() => void nameWorkers().catch(() => {}), 24 * 3600 * 1000).unref() : undefined;
  // Paused before they run when the process cannot serve yet, so that not even a first job is taken.
  const startPaused = opts.canTakeJobs ? !opts.canTakeJobs() : false;
  if (startPaused) await Promise.all(workers.map((w) => w.pause(true)));
  for (const w of workers) void w.run().catch((err: Error) => opts.logger.error({ err: err.message }, 'queue worker stopped'));
  const gate = opts.canTakeJobs ? takeJobsWhile(opts.canTakeJobs, workers, opts.logger, startPaused) : undefined;
  // The handles a follow-on may need are ready before the first job: opening one costs Redis round
  // trips that a stage adding its follow-on must not wait for (test/face-chain.test.ts).
  await Promise.all([...workers.map((w) => w.waitUntilReady()), ...AWAITED_QUEUE_NAMES.map((q) => conns.handle(q).waitUntilReady())]);
  // Beside a queue's Worker, the taker of its follow-on list, when its contract puts follow-ons there.
  const takers = queues
    .filter((q) => {
      const c = JOB_CONTRACTS[q];
      return c.delivery === 'awaited' && c.followOnsOnList;
    })
    .map((q) => takeQueueFollowOns(q, handlers[q] as JobHandler<Q>, stats[q], conns, config, { ...opts, runner, served: queues }));
  opts.logger.info({ queues, concurrency: opts.concurrency }, 'serving queues');

  return {
    queues,
    stats,
    queue: (name: Q) => conns.handle(name),
    close: async () => {
      // Lets running jobs finish, takes no new ones.
      clearInterval(gate);
      await Promise.allSettled([...workers.map((w) => w.close()), ...takers.map((t) => t.close())]);
      clearInterval(renaming);
      if (beat) await conns.redis.del(...workers.map((w) => bullWorkerKey(config.redis.prefix, w.id))).catch(() => {});
      await beat?.stop();
      await conns.close();
    },
  };
}

/** How often `canTakeJobs` is asked. */
export const TAKE_CHECK_MS = 200;

/**
 * Pauses the workers while `can()` says no (running jobs go on), resumes them once it says yes. A
 * fetch already blocked in Redis when they pause may still take a job (BullMQ does not interrupt it):
 * `serveQueue` hands such a job back.
 */
function takeJobsWhile(can: () => boolean, workers: Worker[], logger: Logger, startPaused: boolean): NodeJS.Timeout {
  let paused = startPaused;
  return setInterval(() => {
    const ok = can();
    if (ok === !paused) return;
    paused = !ok;
    if (paused) logger.warn('taking no new job: this process cannot serve one now');
    else logger.info('taking jobs again');
    for (const w of workers) void (paused ? w.pause(true) : w.resume()).catch(() => {});
  }, TAKE_CHECK_MS).unref();
}

/**
 * The runner's connections: one non-blocking connection for replies, handlers' side values and queue
 * handles (re-enqueueing a deferred job, adding a follow-on stage), so that commands a handler sends
 * apply in order; and one blocking connection per Worker.
 */
class RunnerConnections {
  readonly redis: Redis;
  private readonly all: Redis[] = [];
  private readonly handles = new Map<QueueName, Queue>();
  private readonly prefix: string;

  constructor(
    private readonly config: Config,
    logger: Logger,
  ) {
    this.prefix = bullPrefix(config.redis.prefix);
    this.redis = this.open(logger);
  }

  /** A new connection, closed with the runner. */
  open(log: Logger): Redis {
    const connection = bullConnection(redisTarget(this.config.redis));
    connection.on('error', (e) => log.debug({ err: e.message }, 'redis connection error'));
    this.all.push(connection);
    return connection;
  }

  /** A handle on any queue, on the non-blocking connection; opened on first use. */
  handle(name: QueueName): Queue {
    let handle = this.handles.get(name);
    if (!handle) {
      handle = new Queue(name, { connection: this.redis, prefix: this.prefix, ...QUEUE_OPTIONS });
      // Redis outages are reported by /health; without a listener BullMQ prints every reconnect error.
      handle.on('error', () => {});
      this.handles.set(name, handle);
    }
    return handle;
  }

  async close(): Promise<void> {
    await Promise.allSettled([...this.handles.values()].map((q) => q.close()));
    await Promise.allSettled(this.all.map((c) => c.quit().catch(() => c.disconnect())));
  }
}

/** One BullMQ Worker for `queue`, counting into `stats`. */
function serveQueue<Q extends QueueName>(
  queue: Q,
  handler: JobHandler<Q>,
  stats: QueueStats,
  conns: RunnerConnections,
  config: Config,
  opts: RunQueuesOptions & { runner?: { processId: string; redisPrefix: string }; served: readonly QueueName[] },
): Worker {
  const log = opts.logger.child({ queue });
  const processor =
    JOB_CONTRACTS[queue].delivery === 'deferred'
      ? deferredProcessor(queue, handler, stats, conns)
      : awaitedProcessor(queue, handler, stats, conns, log, opts.now ?? Date.now, opts.runner, opts.served, config.redis.prefix);
  // A job that reaches a process which cannot serve it now (a fetch already blocked in Redis when the
  // workers paused, or one re-sent as the connection came back) goes back to the queue untouched,
  // for another process.
  const can = opts.canTakeJobs;
  const gated = can
    ? async (job: Job, token?: string) => {
        if (!can()) {
          await job.moveToWait(token);
          throw new WaitingError();
        }
        return processor(job);
      }
    : processor;
  const worker = new Worker(queue, gated, {
    connection: conns.open(log),
    prefix: bullPrefix(config.redis.prefix),
    concurrency: opts.concurrency,
    autorun: false, // started by runQueues once the Worker is named
  });
  worker.on('completed', () => {
    stats.completed++;
  });
  worker.on('failed', (job, err) => {
    if (err?.message === EXPIRED_REASON) return;
    stats.failed++;
    log.error({ jobId: job?.id, err: err?.message }, 'job failed');
  });
  worker.on('error', (err) => log.warn({ err: err.message }, 'queue worker error'));
  return worker;
}

/**
 * The stages other processes added on `queue`'s follow-on list (platform/face-path/list-taker.ts), served
 * like its jobs and counted into the same `stats`.
 */
function takeQueueFollowOns<Q extends QueueName>(
  queue: Q,
  handler: JobHandler<Q>,
  stats: QueueStats,
  conns: RunnerConnections,
  config: Config,
  opts: RunQueuesOptions & { runner?: { processId: string; redisPrefix: string }; served: readonly QueueName[] },
): ListTaker {
  const log = opts.logger.child({ queue, carrier: 'list' });
  const side = awaitedSide(stats, conns, log, opts.now ?? Date.now, opts.runner, opts.served, config.redis.prefix);
  return takeFollowOns({
    conn: conns.open(log),
    key: followOnListKey(config.redis.prefix, queue),
    concurrency: opts.concurrency,
    canTake: opts.canTakeJobs,
    onMalformed: () => log.warn('malformed stage on the follow-on list: dropped'),
    serve: async (stage) => {
      let skipped = false;
      try {
        await serveStage<Q>(
          stage as Parameters<typeof serveStage<Q>>[0],
          ({ payload, deadlineAt, followOn, answer }) => handler(payload, { deadlineAt, redis: conns.redis, followOn, answer }),
          side,
          async (lateByMs) => {
            skipped = true;
            stats.skippedExpired++;
            log.info({ jobId: stage.id, lateByMs }, 'stage skipped: taken after its deadline');
          },
        );
        if (!skipped) stats.completed++;
      } catch (err) {
        stats.failed++;
        log.error({ jobId: stage.id, err: (err as Error)?.message }, 'stage failed');
      }
    },
  });
}

/** A deferred job is its bare payload, retried as its contract says; nobody awaits it. */
function deferredProcessor<Q extends QueueName>(queue: Q, handler: JobHandler<Q>, stats: QueueStats, conns: RunnerConnections) {
  return async (job: Job) => {
    if (job.data == null || typeof job.data !== 'object') throw new UnrecoverableError(`malformed job "${job.name}" on queue "${queue}"`);
    stats.started++;
    return handler(job.data as JobContracts[Q]['payload'], {
      job,
      deadlineAt: Number.POSITIVE_INFINITY,
      redis: conns.redis,
      followOn: () => {
        throw new Error('a deferred job has no caller to follow on for');
      },
      answer: () => {
        throw new Error('a deferred job has no caller to answer');
      },
    });
  };
}

/** What the face-path protocol needs of this runner to serve an awaited stage (./serve-awaited.ts). */
function awaitedSide(
  stats: QueueStats,
  conns: RunnerConnections,
  log: Logger,
  now: () => number,
  runner: { processId: string; redisPrefix: string } | undefined,
  served: readonly QueueName[],
  redisPrefix: string,
) {
  return {
    redis: conns.redis,
    redisPrefix,
    runner,
    serves: (name: QueueName) => served.includes(name),
    handle: (name: QueueName) => conns.handle(name),
    now,
    onStarted: () => {
      stats.started++;
    },
    onExpired: (job: Job, lateByMs: number) => {
      stats.skippedExpired++;
      log.info({ jobId: job.id, lateByMs }, 'job skipped: picked up after its deadline');
    },
  };
}

/** An awaited job goes through the face-path protocol: deadline, follow-ons, reply. */
function awaitedProcessor<Q extends QueueName>(
  queue: Q,
  handler: JobHandler<Q>,
  stats: QueueStats,
  conns: RunnerConnections,
  log: Logger,
  now: () => number,
  runner: { processId: string; redisPrefix: string } | undefined,
  served: readonly QueueName[],
  redisPrefix: string,
) {
  const side = awaitedSide(stats, conns, log, now, runner, served, redisPrefix);
  return (job: Job) =>
    serveAwaitedJob(
      job,
      queue,
      ({ payload, deadlineAt, followOn, answer }) => handler(payload, { job, deadlineAt, redis: conns.redis, followOn, answer }),
      side,
    );
}
