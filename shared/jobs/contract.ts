/**
 * What a job contract declares besides its payload and result types: how the API uses the queue
 * (awaits each result, or defers the work), the BullMQ options of every job, and the one function
 * that enqueues it. JobClient (shared/job-client.ts) and the runner (workers/run-queue.ts) read these
 * declarations; nobody else passes job options.
 */
import type { Job, JobsOptions, Queue, QueueOptions } from 'bullmq';

/** Every awaited job carries the instant after which nobody awaits it: a worker skips a job picked up later. */
export interface JobEnvelope<P> {
  deadlineAt: number;
  payload: P;
}

/** The API waits for the result within the request (JobClient.run), so a job runs once, on time, or never. */
export interface AwaitedJobContract<Q extends string, P> {
  readonly queue: Q;
  readonly delivery: 'awaited';
  readonly jobOptions: Readonly<JobsOptions>;
  /**
   * How many events the queue's stream keeps (BullMQ trims it to about this many). Every result is
   * copied into a `completed` event, so a queue with large (sealed) results keeps fewer: the API reads
   * each event within milliseconds of its writing, and older ones only cost Redis memory.
   */
  readonly eventsMaxLen: number;
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

/** BullMQ's own default length of a queue's events stream. */
export const DEFAULT_EVENTS_MAX_LEN = 10_000;

/** The options every handle on the contract's queue is opened with (API and workers alike). */
export function queueOptions(contract: JobContract<string, unknown>): Pick<QueueOptions, 'streams'> {
  return { streams: { events: { maxLen: contract.delivery === 'awaited' ? contract.eventsMaxLen : DEFAULT_EVENTS_MAX_LEN } } };
}

export function awaitedJobContract<Q extends string, P>(queue: Q, opts: { eventsMaxLen?: number } = {}): AwaitedJobContract<Q, P> {
  const jobOptions = {
    attempts: 1,
    // The worker deletes the job (payload and result) in the same step that publishes the
    // `completed` / `failed` event; the awaiting request reads the result from that event only.
    removeOnComplete: true,
    removeOnFail: true,
  } as const satisfies JobsOptions;
  return {
    queue,
    delivery: 'awaited',
    jobOptions,
    eventsMaxLen: opts.eventsMaxLen ?? DEFAULT_EVENTS_MAX_LEN,
    enqueue: (q, envelope, jobId) => q.add(queue, envelope, { ...jobOptions, jobId }),
  };
}

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
