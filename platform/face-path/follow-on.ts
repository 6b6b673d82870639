/**
 * A worker adds the next stage of the same request itself (liveness → embed → search), under the id
 * its caller chose and awaits (JobClient.start `followOns`), with the first job's deadline and reply
 * list: a stage's output goes on without a trip through the API. Then, when the adding process itself
 * serves that queue, it wakes one more idle worker of it (wakeIdleWorker).
 */
import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { followOnListKey, type AwaitedJobContract, type JobEnvelope, type ListedStage } from '../jobs/contract.js';
import { JOB_CONTRACTS, type AwaitedQueueName, type JobContracts } from '../jobs/index.js';

/** A follow-on being added. */
export interface FollowOnAdd {
  /**
   * The add and the extra wake-up are written to Redis (not yet answered). A stage that goes on to
   * hold its main thread (a model run) awaits this first, so that an idle process is woken meanwhile.
   */
  written: Promise<void>;
  /** Redis has the job and the wake-up. */
  added: Promise<void>;
}

/**
 * Promise steps to let pass before the wake-up is written, so that it follows BullMQ's add on the
 * connection: BullMQ 6 writes an add one step after `Queue.add` is called; the margin costs
 * microseconds. test/face-chain.test.ts fails if an upgrade takes more.
 */
export const ADD_WRITTEN_AFTER_STEPS = 8;

/**
 * Adds a follow-on job to `handle` (a handle on `redis`, the connection the handler wrote its side
 * values on: commands on one connection apply in order, so a value is in Redis before its job).
 * Throws at once for a deferred queue; `added` rejects when Redis refuses the add or the wake-up.
 */
export function addFollowOn<F extends AwaitedQueueName>(
  redis: Redis,
  /** The deployment's REDIS_PREFIX (where a queue's follow-on list is). */
  redisPrefix: string,
  handle: Queue,
  name: F,
  jobId: string,
  envelope: JobEnvelope<JobContracts[F]['payload']>,
  /**
   * Whether the adding process serves `name` too. Only then can the add's own wake-up go to a worker
   * that cannot act on it (this process's, its main thread held by the stage): a second wake-up is
   * sent. A process that does not serve the queue (a face process adding a search) sends none: it
   * would cost an empty `moveToActive` of a woken search worker (about 9 Redis commands) for nothing.
   */
  wakeAnother = true,
): FollowOnAdd {
  const contract = JOB_CONTRACTS[name] as AwaitedJobContract<F, JobContracts[F]['payload']>;
  if (contract.delivery !== 'awaited') throw new Error(`queue "${name}" is deferred: nobody awaits a follow-on there`);
  if (contract.followOnsOnList) {
    // One LPUSH, taken by one BLPOP of a serving process (./list-taker.ts): its own wake-up.
    const stage: ListedStage<JobContracts[F]['payload']> = { id: jobId, ...envelope };
    const pushed = redis.lpush(followOnListKey(redisPrefix, name), JSON.stringify(stage));
    return { written: Promise.resolve(), added: pushed.then(() => {}) };
  }
  const added = contract.enqueue(handle, envelope, jobId);
  // The wake-up must reach Redis after the add (a worker woken before the job exists finds nothing
  // and blocks again, behind the busy one) and before this process's next poll of its connections:
  // a stage adds its follow-on in the continuation of a model run (a setImmediate callback of
  // onnxruntime-node), so a poll phase comes before its next run, and there its own idle worker of
  // the follow-on's queue, woken by the add, would take the job it cannot run. Written in the same
  // turn, the wake-up lets another process take it while this one prepares and runs its next model.
  if (!wakeAnother) return { written: Promise.resolve(), added: added.then(() => {}) };
  let woken: Promise<void> | undefined;
  const written = (async () => {
    for (let i = 0; i < ADD_WRITTEN_AFTER_STEPS; i++) await undefined;
    woken = wakeIdleWorker(redis, handle);
  })();
  return { written, added: Promise.all([added, written.then(() => woken)]).then(() => {}) };
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
