/**
 * A worker's side of one awaited job (the runner, platform/worker-runtime/run-queue.ts, calls it for every job of an
 * awaited queue):
 * 1. read the deadline envelope (a malformed job fails without retry);
 * 2. skip a job picked up after its deadline: the API has already answered 503 and withdrawn it, or
 *    tried to; the handler never runs, the payload is wiped from Redis at once, and the job fails as
 *    `expired` without retry, so a withdrawn or timed-out request never runs later;
 * 3. name this process as the job's runner (./worker-liveness.ts), then run the handler, which may add the request's next stage (./follow-on.ts) under the same deadline
 *    and reply list;
 * 4. push its result, or the error it threw, to the caller's reply list (./replies.ts), not to
 *    BullMQ: the job completes with no return value, so no result ever enters the events stream.
 */
import { UnrecoverableError, type Job, type Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import type { JobEnvelope } from '../jobs/contract.js';
import type { AwaitedQueueName, JobContracts, QueueName } from '../jobs/index.js';
import { msUntil } from './deadline.js';
import { addFollowOn, type FollowOnAdd } from './follow-on.js';
import { pushReply, type JobReply } from './replies.js';
import { runnerKey } from './worker-liveness.js';

/** Why a job was not run: its deadline had passed when a worker picked it up. */
export const EXPIRED_REASON = 'expired: picked up after its deadline; not run';

/** Adds the next stage of the same request (JobContext.followOn in platform/worker-runtime/run-queue.ts). */
export type FollowOn = <F extends AwaitedQueueName>(queue: F, jobId: string, payload: JobContracts[F]['payload']) => FollowOnAdd;

/**
 * Answers a later stage of the same request that the handler ran in place, without a job of its own
 * (the embed stage, run by the face process that aligned the face): its reply goes to the caller under
 * the id the caller awaits, in the same push as this job's own reply, after it. Dropped if the handler
 * throws (the caller then gives up every stage with this one's error).
 */
export type AnswerInPlace = <F extends AwaitedQueueName>(queue: F, jobId: string, result: JobContracts[F]['result']) => void;

/** What the handler of an awaited job is given besides the job. */
export interface AwaitedCall<Q extends QueueName> {
  payload: JobContracts[Q]['payload'];
  deadlineAt: number;
  followOn: FollowOn;
  answer: AnswerInPlace;
}

export interface AwaitedJobSide {
  /** The runner's non-blocking connection: replies, side values and follow-ons go out on it, in order. */
  redis: Redis;
  /** The deployment's REDIS_PREFIX. */
  redisPrefix: string;
  /** A handle on `redis` for the queue of a follow-on. */
  handle(name: QueueName): Queue;
  /** Whether this process serves `name` (a follow-on there gets a second wake-up: ./follow-on.ts). */
  serves?(name: QueueName): boolean;
  now(): number;
  /** The job was picked up late and not run. */
  onExpired(job: Job, lateByMs: number): void;
  /** The handler is about to run. */
  onStarted(): void;
  /**
   * This process's id and the deployment's Redis prefix: the stage's runner key names the process
   * (./worker-liveness.ts), so that its caller answers at once if the process dies.
   */
  runner?: { processId: string; redisPrefix: string };
}

/** The job's envelope; throws UnrecoverableError (no retry) when it is not one of queue `queue`. */
export function readEnvelope<Q extends QueueName>(job: Job, queue: Q): JobEnvelope<JobContracts[Q]['payload']> {
  const envelope = job.data as Partial<JobEnvelope<JobContracts[Q]['payload']>> | undefined;
  if (job.name !== queue || !envelope || typeof envelope.deadlineAt !== 'number' || typeof envelope.replyTo !== 'string' || envelope.payload == null) {
    throw new UnrecoverableError(`malformed job "${job.name}" on queue "${queue}"`);
  }
  return envelope as JobEnvelope<JobContracts[Q]['payload']>;
}

/** Serves one awaited job (steps 1-4 above); resolves with null, the job's BullMQ return value. */
export async function serveAwaitedJob<Q extends QueueName>(
  job: Job,
  queue: Q,
  handler: (call: AwaitedCall<Q>) => Promise<unknown>,
  side: AwaitedJobSide,
): Promise<null> {
  const { deadlineAt, replyTo, payload } = readEnvelope(job, queue);
  await serveStage({ id: job.id!, deadlineAt, replyTo, payload }, handler, side, async (lateByMs) => {
    side.onExpired(job, lateByMs);
    // Wipe the payload (refs and keys) now rather than when the job ages out.
    await job.updateData({ deadlineAt, payload: null }).catch(() => {});
    throw new UnrecoverableError(EXPIRED_REASON);
  });
  return null;
}

/**
 * Steps 2-4 for one stage, whatever carried it (a BullMQ job, or a follow-on list: ./list-taker.ts):
 * `late` is called instead of the handler when the deadline has passed. Resolves once the reply is
 * pushed; rejects with what the handler threw (after pushing it as the reply).
 */
export async function serveStage<Q extends QueueName>(
  stage: { id: string; deadlineAt: number; replyTo: string; payload: JobContracts[Q]['payload'] },
  handler: (call: AwaitedCall<Q>) => Promise<unknown>,
  side: AwaitedJobSide,
  late: (lateByMs: number) => Promise<void>,
): Promise<void> {
  const { id, deadlineAt, replyTo, payload } = stage;
  if (side.now() > deadlineAt) return late(side.now() - deadlineAt);
  side.onStarted();
  // Not awaited: on the same connection as the reply, so it lands first, and the stage waits for nothing.
  const runner = side.runner && runnerKey(side.runner.redisPrefix, id);
  if (runner) void side.redis.set(runner, side.runner!.processId, 'PX', msUntil(deadlineAt)).catch(() => {});
  const followOn: FollowOn = (next, jobId, nextPayload) =>
    addFollowOn(side.redis, side.redisPrefix, side.handle(next), next, jobId, { deadlineAt, replyTo, payload: nextPayload }, side.serves?.(next) ?? true);
  const inPlace: JobReply[] = [];
  const answer: AnswerInPlace = (_queue, jobId, result) => void inPlace.push({ id: jobId, ok: true, result });
  let result: unknown;
  try {
    result = await handler({ payload, deadlineAt, followOn, answer });
  } catch (e) {
    // The caller answers 503 at once instead of at its deadline; the job still fails in BullMQ.
    await pushReply(side.redis, replyTo, { id, ok: false, error: (e as Error)?.message ?? String(e) }, runner).catch(() => {});
    throw e;
  }
  // A reply that cannot be pushed (Redis gone) fails the job; its caller times out with a 503.
  await pushReply(side.redis, replyTo, [{ id, ok: true, result }, ...inPlace], runner);
}
