/**
 * Fail fast instead of queueing work nobody will do: before a face/search job is enqueued, the job
 * client asks this gate, which answers at once (well under a second) with a 503 and `Retry-After` when
 *   - Redis is unreachable (the queue connection is not ready)            → `dependency_unavailable`;
 *   - no worker is connected to the job's queue (the face or search
 *     process is dead, restarting or still loading its models)             → `face_engine_unavailable`;
 *   - the queue already holds `maxWaiting` jobs nobody has started        → `face_engine_unavailable`
 *     (a bound on waiting work: latency cannot grow without limit).
 * Without the gate such a request waited the whole FACE_JOB_TIMEOUT_MS before its 503.
 *
 * Workers are counted the way BullMQ's own `Queue.getWorkers()` does (CLIENT LIST, by the connection
 * name every BullMQ worker sets), but with ONE `CLIENT LIST` and one pipeline of queue lengths for all
 * queues, shared by concurrent requests. A healthy sample is reused for `sampleMs`; an unhealthy one is
 * never reused (the next request samples again), so a worker that has just started is seen at once.
 */
import type { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { AppError } from '../errors.js';
import { JOB_CONTRACTS, type QueueName } from '../jobs/index.js';

export interface AdmissionOptions {
  /** Jobs waiting (not yet started) on one queue beyond which new work is refused. */
  maxWaiting: number;
  /** How long a healthy sample is reused. */
  sampleMs: number;
  /** Longest wait for Redis to answer the sample (or to finish connecting) before 503. */
  checkTimeoutMs: number;
  /** Retry-After seconds of the 503s. */
  retryAfterSeconds: number;
}

export interface QueueState {
  waiting: number;
  active: number;
  workers: number;
}

interface Sample {
  at: number;
  queues: Map<QueueName, QueueState>;
}

export class JobAdmission {
  private sample: Sample | undefined;
  private sampling: Promise<Sample> | undefined;

  constructor(
    private readonly conn: Redis,
    private readonly queues: Map<QueueName, Queue>,
    private readonly opts: AdmissionOptions,
    /** Told every fresh sample (the `face_queue_*` gauges). */
    private readonly onSample?: (queue: QueueName, state: QueueState) => void,
  ) {}

  /**
   * Resolves when every queue of `queues` (a call's stages) may take a job now; else throws the 503 to
   * answer. One sample answers for all of them: a call is one question, at most one round trip.
   */
  async admit(queues: QueueName | readonly QueueName[]): Promise<void> {
    const names = typeof queues === 'string' ? [queues] : [...new Set(queues)];
    await this.connected();
    let sample = this.sample;
    const fresh = sample && Date.now() - sample.at < this.opts.sampleMs && names.every((q) => this.healthy(sample!, q));
    if (!fresh) sample = await this.take();
    for (const queue of names) this.check(sample!, queue);
  }

  private check(sample: Sample, queue: QueueName): void {
    const state = sample.queues.get(queue) ?? { waiting: 0, active: 0, workers: 0 };
    if (state.workers === 0) {
      throw new AppError('face_engine_unavailable', `No ${queue === 'search' ? 'search' : 'face'} worker is running; try again shortly`, {
        details: { queue, reason: 'no_worker' },
        retryAfter: this.opts.retryAfterSeconds,
      });
    }
    if (state.waiting >= this.opts.maxWaiting) {
      throw new AppError('face_engine_unavailable', 'The face engine is at capacity; try again shortly', {
        details: { queue, reason: 'overloaded', waiting: state.waiting },
        retryAfter: this.opts.retryAfterSeconds,
      });
    }
  }

  /**
   * Workers on `queue` now: a sample no older than `maxAgeMs` (shared by concurrent callers), else a
   * new one. For a stage admitted on a reused sample that nobody has taken since: its workers may have
   * died within the sample's lifetime (./worker-liveness.ts `RunnerWatch`).
   */
  async workersNow(queue: QueueName, maxAgeMs: number): Promise<number> {
    const recent = this.sample && Date.now() - this.sample.at <= maxAgeMs ? this.sample : await this.take();
    return recent.queues.get(queue)?.workers ?? 0;
  }

  /** The last sample's figures (for /health and the gauges). */
  last(): Map<QueueName, QueueState> | undefined {
    return this.sample?.queues;
  }

  private healthy(sample: Sample, queue: QueueName): boolean {
    const s = sample.queues.get(queue);
    return !!s && s.workers > 0 && s.waiting < this.opts.maxWaiting;
  }

  private unavailable(cause?: unknown): AppError {
    return new AppError('dependency_unavailable', 'The job queue (Redis) is unavailable', { retryAfter: this.opts.retryAfterSeconds, cause });
  }

  /** Ready at once; a first connection in progress is awaited (bounded); a lost one is 503 at once. */
  private async connected(): Promise<void> {
    const status = this.conn.status;
    if (status === 'ready') return;
    if (status !== 'wait' && status !== 'connecting' && status !== 'connect') throw this.unavailable();
    await new Promise<void>((resolve, reject) => {
      const done = (ok: boolean) => {
        clearTimeout(timer);
        this.conn.off('ready', onReady);
        this.conn.off('close', onClose);
        if (ok) resolve();
        else reject(this.unavailable());
      };
      const onReady = () => done(true);
      const onClose = () => done(false);
      const timer = setTimeout(() => done(false), this.opts.checkTimeoutMs);
      this.conn.once('ready', onReady);
      this.conn.once('close', onClose);
    });
  }

  private take(): Promise<Sample> {
    this.sampling ??= this.read().finally(() => {
      this.sampling = undefined;
    });
    return this.sampling;
  }

  private async read(): Promise<Sample> {
    // Only the queues a call awaits are ever asked about: a deferred queue's handle (opened by the
    // queue dashboard, or to enqueue) is not sampled (3 commands each, in every sample).
    const names = [...this.queues.keys()].filter((q) => JOB_CONTRACTS[q].delivery === 'awaited');
    const pipeline = this.conn.pipeline();
    pipeline.call('CLIENT', 'LIST', 'TYPE', 'normal');
    for (const name of names) {
      const keys = this.queues.get(name)!.keys;
      pipeline.llen(keys.wait!);
      pipeline.zcard(keys.prioritized!);
      pipeline.llen(keys.active!);
    }
    let timer: NodeJS.Timeout | undefined;
    const replies = await Promise.race([
      pipeline.exec(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`Redis did not answer within ${this.opts.checkTimeoutMs} ms`)), this.opts.checkTimeoutMs);
      }),
    ])
      .catch((e: unknown) => {
        throw this.unavailable(e);
      })
      .finally(() => clearTimeout(timer));
    const value = (i: number) => {
      const [err, v] = replies![i]!;
      if (err) throw this.unavailable(err);
      return v;
    };
    const clientNames = String(value(0))
      .split('\n')
      .map((line) => /(?:^| )name=(\S*)/.exec(line)?.[1] ?? '')
      .filter(Boolean);
    const queues = new Map<QueueName, QueueState>();
    names.forEach((name, i) => {
      // BullMQ names a worker's connections `<clientName>` or `<clientName>:w:<worker name>` (Queue.getWorkers).
      // clientName() is BullMQ's own (protected) naming; reused rather than copied.
      const base = (this.queues.get(name) as unknown as { clientName(): string }).clientName();
      const workers = clientNames.filter((n) => n === base || n.startsWith(`${base}:w:`)).length;
      const state = { waiting: Number(value(1 + i * 3)) + Number(value(2 + i * 3)), active: Number(value(3 + i * 3)), workers };
      queues.set(name, state);
      this.onSample?.(name, state);
    });
    const sample = { at: Date.now(), queues };
    this.sample = sample;
    return sample;
  }
}
