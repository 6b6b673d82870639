/**
 * What a job contract declares besides its payload and result types: how the API uses the queue
 * (awaits each result, or defers the work), the BullMQ options of every job, and the one function
 * that enqueues it. JobClient (platform/face-path/job-client.ts) and the runner (platform/worker-runtime/run-queue.ts) read these
 * declarations; nobody else passes job options.
 */
import type { Job, JobsOptions, Queue, QueueOptions } from 'bullmq';

/** Every awaited job carries the instant after which nobody awaits it: a worker skips a job picked up later. */
export interface JobEnvelope<P> {
  deadlineAt: number;
  payload: P;
  /** The caller's reply list (platform/face-path/replies.ts): the runner pushes the result there. */
  replyTo: string;
}

/** The API waits for the result within the request (JobClient.run), so a job runs once, on time, or never. */
export interface AwaitedJobContract<Q extends string, P> {
  readonly queue: Q;
  readonly delivery: 'awaited';
  readonly jobOptions: Readonly<JobsOptions>;
  /**
   * A follow-on stage of this queue (added by a worker, JobContext.followOn) travels on the queue's
   * follow-on list (`followOnListKey`) instead of as a BullMQ job: one LPUSH, one BLPOP, no scripts
   * (platform/face-path/README.md, "The follow-on list"). The caller's own jobs stay BullMQ jobs.
   */
  readonly followOnsOnList: boolean;
  /** Adds the job under the caller's id: the caller registers its waiter before the job exists. */
  enqueue(queue: Queue, envelope: JobEnvelope<P>, jobId: string): Promise<Job>;
}

/** Enqueued and left (delayed, fire-and-forget): nobody reads the result, so the job may retry. */
export interface DeferredJobContract<Q extends string, P> {
  readonly queue: Q;
  readonly delivery: 'deferred';
  readonly jobOptions: Readonly<JobsOptions>;
  /** The job id the payload determines: enqueueing the same work twice is a no-op. */
  jobId(payload: P): string;
  enqueue(queue: Queue, payload: P, opts: { delayMs: number }): Promise<Job>;
}

export type JobContract<Q extends string, P> = AwaitedJobContract<Q, P> | DeferredJobContract<Q, P>;

/** Where BullMQ keeps the queues of a deployment (under its REDIS_PREFIX). */
export const bullPrefix = (redisPrefix: string) => `${redisPrefix}:bull`;

/**
 * The options every handle on a queue is opened with (API and workers alike). Nobody reads the events
 * streams any more (results travel on reply lists, platform/face-path/replies.ts, and never enter a stream), so
 * they keep only enough for the queue dashboard and debugging.
 */
export const QUEUE_OPTIONS: Readonly<Pick<QueueOptions, 'streams'>> = { streams: { events: { maxLen: 1000 } } };

/** The follow-on list of an awaited queue (under the deployment's REDIS_PREFIX): JSON envelopes with their job id. */
export const followOnListKey = (redisPrefix: string, queue: string) => `${redisPrefix}:jobs:list:${queue}`;

/** A follow-on stage on its queue's list: the envelope of a job, with the id its caller awaits. */
export interface ListedStage<P> extends JobEnvelope<P> {
  id: string;
}

export function awaitedJobContract<Q extends string, P>(queue: Q, opts: { followOnsOnList?: boolean } = {}): AwaitedJobContract<Q, P> {
  const jobOptions = {
    attempts: 1,
    // The worker deletes the job (its payload) when it finishes; the result went to the caller's
    // reply list and was never stored in the job.
    removeOnComplete: true,
    removeOnFail: true,
  } as const satisfies JobsOptions;
  return {
    queue,
    delivery: 'awaited',
    jobOptions,
    followOnsOnList: opts.followOnsOnList === true,
    enqueue: (q, envelope, jobId) => q.add(queue, envelope, { ...jobOptions, jobId }),
  };
}

/**
 * The options of a deferred job whose work is idempotent and whose payload holds no personal data:
 * nobody waits for the result, so a failure (PostgreSQL away for a moment) is retried with backoff, and
 * a job that failed every attempt is kept a week for the queue dashboard.
 */
export const RETRIED_JOB_OPTIONS = {
  attempts: 5,
  backoff: { type: 'exponential', delay: 1000 },
  removeOnComplete: true,
  removeOnFail: { age: 7 * 24 * 3600 },
} as const satisfies JobsOptions;

export function deferredJobContract<Q extends string, P>(spec: {
  queue: Q;
  jobOptions: JobsOptions;
  /** The BullMQ job name (shown by the queue dashboard). */
  jobName(payload: P): string;
  jobId(payload: P): string;
}): DeferredJobContract<Q, P> {
  return {
    queue: spec.queue,
    delivery: 'deferred',
    jobOptions: spec.jobOptions,
    jobId: spec.jobId,
    enqueue: (q, payload, { delayMs }) =>
      q.add(spec.jobName(payload), payload, { ...spec.jobOptions, jobId: spec.jobId(payload), delay: Math.max(0, delayMs) }),
  };
}
