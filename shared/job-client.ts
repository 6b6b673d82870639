/**
 * Enqueue a face/search job and await its result, so that API endpoints stay synchronous; and the
 * plain queue handle through which a deferred job is enqueued by its contract (shared/jobs/upstream.ts).
 *
 * - Every job carries a deadline; a job still waiting when its deadline passes is withdrawn from the
 *   queue (and a worker that picks one up late skips it), so a timed-out request never runs later.
 * - A job is removed from Redis by the worker in the step that publishes its result (the result is read
 *   from that `completed` event): no job hash with a face image or embedding lingers.
 * - Timeouts and an unreachable Redis become 503 `face_engine_unavailable` / `dependency_unavailable`.
 */
import { randomUUID } from 'node:crypto';
import { Job, Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { AppError } from './errors.js';
import { queueOptions, type AwaitedJobContract } from './jobs/contract.js';
import { AWAITED_QUEUE_NAMES, JOB_CONTRACTS, type JobContracts, type JobEnvelope, type QueueName } from './jobs/index.js';
import { bullConnection } from './redis.js';
import { JobAdmission, type AdmissionOptions, type QueueState } from './job-admission.js';

export const bullPrefix = (redisPrefix: string) => `${redisPrefix}:bull`;

export interface JobClientOptions {
  redisUrl: string;
  redisPrefix: string;
  timeoutMs: number;
  /** Fail fast (shared/job-admission.ts): no worker, Redis down or too much waiting work is a 503 before enqueueing. */
  admission?: AdmissionOptions & { onSample?: (queue: QueueName, state: QueueState) => void };
}

export class JobTimeoutError extends AppError {
  constructor(queue: QueueName, timeoutMs: number, readonly withdrawn: boolean, retryAfter?: number) {
    super('face_engine_unavailable', `The face engine did not answer within ${timeoutMs} ms`, {
      details: { queue, withdrawn },
      retryAfter,
    });
  }
}

/**
 * One blocking reader for the event streams of every queue (one XREAD over all of them), instead of a
 * BullMQ QueueEvents per queue: fewer connections, fewer wake-ups and round trips per job. Only the
 * `completed` (with its `returnvalue`) and `failed` events of jobs a waiter registered are used.
 */
class EventReader {
  private readonly waiters = new Map<string, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private closing = false;
  private loop: Promise<void> | undefined;
  readonly ready: Promise<void>;

  constructor(
    private readonly conn: Redis,
    private readonly streams: string[],
  ) {
    this.ready = this.start();
    this.ready.catch(() => {});
  }

  private async start(): Promise<void> {
    // Read from the current end of each stream (its last id as Redis numbers it; no clock assumed).
    const ids: string[] = [];
    for (;;) {
      try {
        const pipeline = this.conn.pipeline();
        for (const key of this.streams) pipeline.xrevrange(key, '+', '-', 'COUNT', 1);
        const replies = (await pipeline.exec()) ?? [];
        for (const [err, entries] of replies) {
          if (err) throw err;
          ids.push((entries as [string, string[]][])[0]?.[0] ?? '0-0');
        }
        break;
      } catch (e) {
        if (this.closing) throw e;
        ids.length = 0;
        await new Promise((r) => setTimeout(r, 200));
      }
    }
    this.loop = this.consume(ids);
  }

  private async consume(ids: string[]): Promise<void> {
    const index = new Map(this.streams.map((k, i) => [k, i]));
    while (!this.closing) {
      let data: [string, [string, string[]][]][] | null;
      try {
        data = (await this.conn.xread('BLOCK', 10_000, 'STREAMS', ...this.streams, ...ids)) as typeof data;
      } catch {
        if (this.closing) return;
        await new Promise((r) => setTimeout(r, 200)); // Redis down: waiters time out on their own
        continue;
      }
      if (!data) continue;
      for (const [key, entries] of data) {
        const i = index.get(key)!;
        for (const [id, fields] of entries) {
          ids[i] = id;
          let event: string | undefined;
          let jobId: string | undefined;
          let value: string | undefined;
          for (let f = 0; f + 1 < fields.length; f += 2) {
            const name = fields[f];
            if (name === 'event') event = fields[f + 1];
            else if (name === 'jobId') jobId = fields[f + 1];
            else if (name === 'returnvalue' || name === 'failedReason') value = fields[f + 1];
          }
          if ((event !== 'completed' && event !== 'failed') || jobId === undefined) continue;
          const waiter = this.waiters.get(`${i}:${jobId}`);
          if (!waiter) continue;
          this.waiters.delete(`${i}:${jobId}`);
          if (event === 'completed') {
            try {
              waiter.resolve(value === undefined ? undefined : JSON.parse(value));
            } catch (e) {
              waiter.reject(e as Error);
            }
          } else {
            waiter.reject(new Error(value ?? 'job failed'));
          }
        }
      }
    }
  }

  /** Registers a waiter BEFORE the job is added, so its completion cannot be missed. */
  wait(streamIndex: number, jobId: string): { result: Promise<unknown>; cancel: () => void } {
    const key = `${streamIndex}:${jobId}`;
    const result = new Promise<unknown>((resolve, reject) => this.waiters.set(key, { resolve, reject }));
    result.catch(() => {});
    return { result, cancel: () => this.waiters.delete(key) };
  }

  async close(): Promise<void> {
    this.closing = true;
    for (const w of this.waiters.values()) w.reject(new Error('job client closing'));
    this.waiters.clear();
    this.conn.disconnect(); // ends the blocking XREAD
    await this.loop?.catch(() => {});
  }
}

export class JobClient {
  private readonly connections: Redis[] = [];
  private readonly queues = new Map<QueueName, Queue>();
  private readonly streamIndex = new Map<QueueName, number>();
  private readonly reader: EventReader;
  private readonly admission: JobAdmission | undefined;
  /** Every 503 of a job says when to try again (the fail-fast setting; none without admission). */
  private get retryAfter(): number | undefined {
    return this.opts.admission?.retryAfterSeconds;
  }
  private isReady = false;

  private readonly queueConnection: Redis;

  constructor(private readonly opts: JobClientOptions) {
    // One connection for adding jobs to every queue, one for the blocking event reader. Only the
    // awaited queues have their event streams read; a deferred queue's handle opens on first use.
    this.queueConnection = this.connection();
    const streams: string[] = [];
    for (const name of AWAITED_QUEUE_NAMES) {
      const queue = this.queue(name);
      this.streamIndex.set(name, streams.length);
      streams.push(queue.keys.events!);
    }
    this.reader = new EventReader(this.connection(), streams);
    this.admission = opts.admission ? new JobAdmission(this.queueConnection, this.queues, opts.admission, opts.admission.onSample) : undefined;
  }

  private connection(): Redis {
    const c = bullConnection(this.opts.redisUrl);
    c.on('error', () => {}); // reported through /health and the request that hits it
    this.connections.push(c);
    return c;
  }

  /** The queue's handle (for a deferred queue, what its contract's enqueue function takes). */
  queue(name: QueueName): Queue {
    let queue = this.queues.get(name);
    if (!queue) {
      queue = new Queue(name, { connection: this.queueConnection, prefix: bullPrefix(this.opts.redisPrefix), ...queueOptions(JOB_CONTRACTS[name]) });
      // Connection errors surface through /health and the requests that meet them, not as noise.
      queue.on('error', () => {});
      this.queues.set(name, queue);
    }
    return queue;
  }

  /**
   * Runs one job of an awaited queue and returns its result; throws AppError 503 on timeout or when
   * Redis is down. A deferred queue's job is enqueued through its contract instead (a programming error here).
   */
  async run<Q extends QueueName>(
    name: Q,
    payload: JobContracts[Q]['payload'],
    opts: { timeoutMs?: number } = {},
  ): Promise<JobContracts[Q]['result']> {
    const contract = JOB_CONTRACTS[name];
    if (contract.delivery !== 'awaited') throw new Error(`queue "${name}" is deferred: enqueue its jobs through its contract, nobody awaits them`);
    const timeoutMs = opts.timeoutMs ?? this.opts.timeoutMs;
    // Before anything is enqueued: a 503 at once rather than a wait nobody will end (issue 10).
    await this.admission?.admit(name);
    const started = Date.now();
    const deadlineAt = started + timeoutMs;
    const envelope: JobEnvelope<Q> = { deadlineAt, payload };
    const queue = this.queue(name);
    // Our own id, so that the waiter is registered before the job exists.
    const jobId = randomUUID();
    let waiter: ReturnType<EventReader['wait']> | undefined;

    const job = await withDeadline(
      (async () => {
        if (!this.isReady) {
          await this.reader.ready;
          this.isReady = true;
        }
        waiter = this.reader.wait(this.streamIndex.get(name)!, jobId);
        // The contract of queue Q takes Q's envelope (TypeScript cannot correlate the two through the union).
        return (contract as AwaitedJobContract<Q, JobContracts[Q]['payload']>).enqueue(queue, envelope, jobId);
      })(),
      deadlineAt,
    ).catch((e: unknown) => {
      waiter?.cancel();
      if (e instanceof DeadlineError) {
        // The add may still land: withdraw it if it does (best effort; a late worker skips it anyway).
        void this.queue(name).remove(jobId).catch(() => {});
        throw new AppError('dependency_unavailable', 'The job queue (Redis) is unavailable', { retryAfter: this.retryAfter });
      }
      throw new AppError('dependency_unavailable', 'The job queue (Redis) is unavailable', { cause: e, retryAfter: this.retryAfter });
    });

    let timer: NodeJS.Timeout | undefined;
    const timedOut = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new DeadlineError('deadline')), Math.max(1, deadlineAt - Date.now()));
    });
    try {
      return (await Promise.race([waiter!.result, timedOut])) as JobContracts[Q]['result'];
    } catch (e) {
      if (e instanceof DeadlineError) {
        waiter!.cancel();
        const withdrawn = await withdraw(job);
        throw new JobTimeoutError(name, timeoutMs, withdrawn, this.retryAfter);
      }
      throw new AppError('face_engine_unavailable', 'The face engine failed to process the request', {
        retryAfter: this.retryAfter,
        details: { queue: name },
        cause: e,
      });
    } finally {
      clearTimeout(timer);
    }
  }

  /** Counts of jobs per state, for /health and the tests. */
  async counts(name: QueueName): Promise<Record<string, number>> {
    return this.queue(name).getJobCounts('waiting', 'active', 'delayed', 'completed', 'failed', 'prioritized');
  }

  async close(): Promise<void> {
    await this.reader.close();
    await Promise.allSettled([...this.queues.values()].map((q) => q.close()));
    await Promise.allSettled(this.connections.map((c) => c.quit().catch(() => c.disconnect())));
  }
}

/** Removes a job that no worker has started. Returns false when a worker already holds it. */
async function withdraw(job: Job): Promise<boolean> {
  try {
    const state = await job.getState();
    if (state === 'active') return false;
    await job.remove();
    return true;
  } catch {
    return false;
  }
}

class DeadlineError extends Error {}

function withDeadline<T>(p: Promise<T>, deadlineAt: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new DeadlineError('deadline')), Math.max(1, deadlineAt - Date.now()));
    p.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (e) => {
        clearTimeout(timer);
        reject(e);
      },
    );
  });
}
