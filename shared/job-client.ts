/**
 * Enqueue a face/search job and await its result, so that API endpoints stay synchronous.
 *
 * - Every job carries a deadline; a job still waiting when its deadline passes is withdrawn from the
 *   queue (and a worker that picks one up late skips it), so a timed-out request never runs later.
 * - A job is removed from Redis as soon as its result is read: no face image or embedding lingers.
 * - Timeouts and an unreachable Redis become 503 `face_engine_unavailable` / `dependency_unavailable`.
 */
import { Job, Queue, QueueEvents } from 'bullmq';
import type { Redis } from 'ioredis';
import { AppError } from './errors.js';
import type { JobContracts, JobEnvelope, QueueName } from './jobs/index.js';
import { QUEUE_NAMES } from './jobs/index.js';
import { bullConnection } from './redis.js';

export const bullPrefix = (redisPrefix: string) => `${redisPrefix}:bull`;

export interface JobClientOptions {
  redisUrl: string;
  redisPrefix: string;
  timeoutMs: number;
}

export class JobTimeoutError extends AppError {
  constructor(queue: QueueName, timeoutMs: number, readonly withdrawn: boolean) {
    super('face_engine_unavailable', `The face engine did not answer within ${timeoutMs} ms`, {
      details: { queue, withdrawn },
    });
  }
}

export class JobClient {
  private readonly connections: Redis[] = [];
  private readonly queues = new Map<QueueName, Queue>();
  private readonly events = new Map<QueueName, QueueEvents>();
  private ready: Promise<void> | undefined;

  constructor(private readonly opts: JobClientOptions) {
    const prefix = bullPrefix(opts.redisPrefix);
    for (const name of QUEUE_NAMES) {
      const qc = this.connection();
      const queue = new Queue(name, { connection: qc, prefix });
      const events = new QueueEvents(name, { connection: this.connection(), prefix });
      // Connection errors surface through /health and the requests that meet them, not as noise.
      queue.on('error', () => {});
      events.on('error', () => {});
      this.queues.set(name, queue);
      this.events.set(name, events);
    }
  }

  private connection(): Redis {
    const c = bullConnection(this.opts.redisUrl);
    c.on('error', () => {}); // reported through /health and the request that hits it
    this.connections.push(c);
    return c;
  }

  queue(name: QueueName): Queue {
    return this.queues.get(name)!;
  }

  private async whenReady(): Promise<void> {
    this.ready ??= Promise.all([...this.events.values()].map((e) => e.waitUntilReady())).then(() => undefined);
    return this.ready;
  }

  /** Runs one job and returns its result; throws AppError 503 on timeout or when Redis is down. */
  async run<Q extends QueueName>(
    name: Q,
    payload: JobContracts[Q]['payload'],
    opts: { timeoutMs?: number } = {},
  ): Promise<JobContracts[Q]['result']> {
    const timeoutMs = opts.timeoutMs ?? this.opts.timeoutMs;
    const started = Date.now();
    const deadlineAt = started + timeoutMs;
    const envelope: JobEnvelope<Q> = { deadlineAt, payload };
    const queue = this.queue(name);

    const job = await withDeadline(
      (async () => {
        await this.whenReady();
        return queue.add(name, envelope, {
          attempts: 1,
          // Safety nets only: the normal path removes the job the moment its result is read.
          removeOnComplete: { age: 60 },
          removeOnFail: { age: 60 },
        });
      })(),
      deadlineAt,
    ).catch((e: unknown) => {
      if (e instanceof DeadlineError) {
        throw new AppError('dependency_unavailable', 'The job queue (Redis) is unavailable');
      }
      throw new AppError('dependency_unavailable', 'The job queue (Redis) is unavailable', { cause: e });
    });

    try {
      const remaining = Math.max(1, deadlineAt - Date.now());
      const result = (await job.waitUntilFinished(this.events.get(name)!, remaining)) as JobContracts[Q]['result'];
      return result;
    } catch (e) {
      const message = e instanceof Error ? e.message : String(e);
      if (/timed out/i.test(message)) {
        const withdrawn = await withdraw(job);
        throw new JobTimeoutError(name, timeoutMs, withdrawn);
      }
      throw new AppError('face_engine_unavailable', 'The face engine failed to process the request', {
        details: { queue: name },
        cause: e,
      });
    } finally {
      await job.remove().catch(() => {});
    }
  }

  /** Counts of jobs per state, for /health and the tests. */
  async counts(name: QueueName): Promise<Record<string, number>> {
    return this.queue(name).getJobCounts('waiting', 'active', 'delayed', 'completed', 'failed', 'prioritized');
  }

  async close(): Promise<void> {
    await Promise.allSettled([...this.events.values()].map((e) => e.close()));
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
