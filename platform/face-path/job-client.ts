/**
 * Enqueue a face/search job and await its result, so that API endpoints stay synchronous; and the
 * plain queue handle through which a deferred job is enqueued by its contract (platform/jobs/upstream.ts).
 *
 * - Every job carries a deadline; a job still waiting when its deadline passes is withdrawn from the
 *   queue (and a worker that picks one up late skips it), so a timed-out request never runs later.
 * - The result comes back on this process's reply list (./replies.ts), never through BullMQ's
 *   events stream; the worker removes the job (its payload) when it finishes: no job hash with a face
 *   image or embedding lingers.
 * - Timeouts and an unreachable Redis become 503 `face_engine_unavailable` / `dependency_unavailable`.
 * - A stage whose worker process dies under it is answered at once, not at the deadline: 503
 *   `face_engine_unavailable` (`details.reason` `worker_lost`) with Retry-After (./worker-liveness.ts).
 */
import { randomUUID } from 'node:crypto';
import { Queue } from 'bullmq';
import type { Redis } from 'ioredis';
import { AppError } from '../errors.js';
import { bullPrefix, QUEUE_OPTIONS, type AwaitedJobContract } from '../jobs/contract.js';
import { AWAITED_QUEUE_NAMES, JOB_CONTRACTS, type JobContracts, type JobEnvelope, type QueueName } from '../jobs/index.js';
import { bullConnection, STALLED_SOCKET_MS, type RedisTarget } from '../redis/redis.js';
import { JobAdmission, type AdmissionOptions, type QueueState } from './admission.js';
import { DeadlineError, msUntil, withDeadline, withdraw } from './deadline.js';
import { parseReply, replyListKey } from './replies.js';
import { ShardAdmission } from './shard-admission.js';
import { beatEveryMs, NoWorkerError, RunnerWatch, WorkerLostError } from './worker-liveness.js';

export interface JobClientOptions {
  /** A URL, or Sentinels naming the master (platform/redis/redis.ts `redisTarget`). */
  redisUrl: RedisTarget;
  redisPrefix: string;
  timeoutMs: number;
  /** Fail fast (./admission.ts): no worker, Redis down or too much waiting work is a 503 before enqueueing. */
  admission?: AdmissionOptions & { onSample?: (queue: QueueName, state: QueueState) => void };
  /**
   * The workers' liveness period (`queues.workerLivenessMs`): while a stage is awaited, its worker
   * process is checked every third of it, and a stage whose process is gone answers 503 at once.
   * Without it, such a stage is answered at the deadline.
   */
  workerLivenessMs?: number;
}

export interface StartOptions {
  timeoutMs?: number;
  /**
   * Values the job reads from Redis (./handoff.ts), written just before it on the
   * same connection (no extra round trip), after admission, and expiring at the job's deadline.
   */
  withValues?: { key: string; value: Buffer }[];
  /** The first job's id (default: a new UUID). */
  jobId?: string;
  /** The stages the workers add after the first job (JobContext.followOn), by queue and the id they will carry. */
  followOns?: { queue: QueueName; jobId: string }[];
  /**
   * The caller asked the fail-fast gate (`admit`) for every queue of this run already, for this call:
   * the gate is not asked again. A worker that died since is still answered at once (RunnerWatch).
   */
  admitted?: boolean;
}

/** A request's stages after JobClient.start: each stage's result, awaited within the shared deadline. */
export interface StagedRun {
  /** The first job's id. */
  jobId: string;
  /**
   * Resolves with the result of the stage's job (the first job, or a follow-on by its id); 503
   * `face_engine_unavailable` when it fails or the deadline passes (which also gives up the others).
   */
  result<S extends QueueName>(stage: S, jobId: string): Promise<JobContracts[S]['result']>;
  /** Stops awaiting every stage: replies that still come are dropped (a capture decided early). */
  abandon(): void;
}

/**
 * How long an answer waits for its job to be withdrawn. The queue store itself may be what is away (a
 * master whose host is cut off answers nothing until the fail-over): the answer is not held for it;
 * the withdrawal goes on, and a worker that takes the job after its deadline skips it anyway.
 */
const WITHDRAW_WAIT_MS = 300;

/** `withdraw`, waited for at most WITHDRAW_WAIT_MS: whether the job was seen withdrawn by then. */
async function withdrawWithin(queue: Queue, jobId: string): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      withdraw(queue, jobId).catch(() => false),
      new Promise<boolean>((resolve) => (timer = setTimeout(() => resolve(false), WITHDRAW_WAIT_MS))),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

export class JobTimeoutError extends AppError {
  constructor(
    queue: QueueName,
    timeoutMs: number,
    readonly withdrawn: boolean,
    retryAfter?: number,
  ) {
    super('face_engine_unavailable', `The face engine did not answer within ${timeoutMs} ms`, {
      details: { queue, withdrawn },
      retryAfter,
    });
  }
}

/** A broadcast's replies that did not come by its deadline (JobClient.broadcast). */
export class ShardTimeoutError extends Error {
  constructor(
    readonly missing: string[],
    readonly retryAfter: number,
  ) {
    super(`no reply for ${missing.join(', ')}`);
  }
}

interface ReplyWaiter {
  result: Promise<unknown>;
  /** Stops waiting: a reply that still comes is dropped. */
  cancel(): void;
}

/** The reply reader's BLPOP timeout (below STALLED_SOCKET_MS). */
const READER_BLOCK_SECONDS = 1;

/**
 * The one blocking reader of this process's reply list (./replies.ts): every awaited job names
 * the list in its envelope and its worker pushes the result there, so each job costs this process one
 * wake-up, for its own result (BullMQ's events streams, with 4-5 events per job, are not read at all).
 */
class ReplyReader {
  private readonly waiters = new Map<string, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private closing = false;
  private readonly loop: Promise<void>;

  constructor(
    private readonly conn: Redis,
    readonly key: string,
  ) {
    this.loop = this.consume();
  }

  /** When the last BLPOP came back (a reply or its timeout): the reader's link answers. */
  private answeredAt = Date.now();

  private async consume(): Promise<void> {
    while (!this.closing) {
      let popped: [string, string] | null;
      try {
        // Replies wake it at once; the timeout (under the connection's STALLED_SOCKET_MS) makes a
        // silent connection show: one that was cut and healed is made again instead of waiting for
        // the kernel's next retransmission.
        popped = await this.conn.blpop(this.key, READER_BLOCK_SECONDS);
        this.answeredAt = Date.now();
      } catch {
        if (this.closing) return;
        await new Promise((r) => setTimeout(r, 200)); // Redis down: waiters time out on their own
        continue;
      }
      if (popped) this.deliver(popped[1]);
    }
  }

  private deliver(raw: string): void {
    const reply = parseReply(raw);
    if (!reply) return;
    const waiter = this.waiters.get(reply.id);
    if (!waiter) return; // its caller gave up (deadline): nobody awaits it
    this.waiters.delete(reply.id);
    if (reply.ok) waiter.resolve(reply.result);
    else waiter.reject(new Error(reply.error));
  }

  /** Whether replies reach this process now: the reader's last wait came back within its period and a little. */
  get answering(): boolean {
    return this.conn.status === 'ready' && Date.now() - this.answeredAt < READER_BLOCK_SECONDS * 1000 + 1500;
  }

  /** Registers a waiter BEFORE the job is added, so its reply cannot be missed. */
  wait(jobId: string): ReplyWaiter {
    const result = new Promise<unknown>((resolve, reject) => this.waiters.set(jobId, { resolve, reject }));
    result.catch(() => {});
    return { result, cancel: () => this.waiters.delete(jobId) };
  }

  async close(): Promise<void> {
    this.closing = true;
    for (const w of this.waiters.values()) w.reject(new Error('job client closing'));
    this.waiters.clear();
    this.conn.disconnect(); // ends the blocking BLPOP
    await this.loop.catch(() => {});
  }
}

/** One stage of a run: its queue and the job id its worker gives it. */
interface Stage {
  queue: QueueName;
  jobId: string;
}

/**
 * The waiters of one request's stages, registered before anything is enqueued, sharing one deadline.
 * A stage that times out gives up the others too: nobody awaits the rest of the request.
 */
class RunStages implements StagedRun {
  private readonly waiters = new Map<string, { queue: QueueName; waiter: ReplyWaiter }>();
  /** Rejects once a stage's worker process is found dead: every stage of the request answers with it. */
  private readonly lost: Promise<never>;
  private loseAll!: (e: AppError) => void;

  constructor(
    readonly jobId: string,
    stages: Stage[],
    reader: ReplyReader,
    private readonly deadlineAt: number,
    private readonly timeoutMs: number,
    private readonly client: { queue(name: QueueName): Queue; retryAfter: number | undefined; watch: RunnerWatch | undefined },
  ) {
    for (const s of stages) this.waiters.set(s.jobId, { queue: s.queue, waiter: reader.wait(s.jobId) });
    this.lost = new Promise<never>((_, reject) => (this.loseAll = reject));
    this.lost.catch(() => {});
  }

  abandon = (): void => {
    for (const { waiter } of this.waiters.values()) waiter.cancel();
  };

  result = async <S extends QueueName>(stage: S, id: string): Promise<JobContracts[S]['result']> => {
    const entry = this.waiters.get(id);
    if (!entry || entry.queue !== stage) throw new Error(`no stage "${stage}" with job id ${id} in this run`);
    const runner = this.client.watch?.watch(id, stage, id === this.jobId);
    try {
      const awaited = [withDeadline(entry.waiter.result, this.deadlineAt), this.lost, ...(runner ? [runner.lost] : [])];
      return (await Promise.race(awaited)) as JobContracts[S]['result'];
    } catch (e) {
      if (e instanceof WorkerLostError) {
        // Its process was killed: the reply will never come. Every stage of the request answers now;
        // the stage's inputs were taken once by the dead process, so it is not run again (the caller
        // retries the request). BullMQ moves the job back after its lock runs out, past the deadline:
        // the worker that picks it up then skips it.
        // Right after this process's own Redis connection failed, the lapse is Redis's (a fail-over),
        // not the process's: the same 503, named for what was away.
        const lost = e.queueStoreTrouble
          ? new AppError('dependency_unavailable', 'The queue store (Redis) failed over while this request ran; try again', {
              retryAfter: this.client.retryAfter ?? 1,
              details: { queue: stage, reason: 'queue_store_failover' },
            })
          : new AppError('face_engine_unavailable', 'The face engine process running this request stopped; try again', {
              retryAfter: this.client.retryAfter ?? 1,
              details: { queue: stage, reason: 'worker_lost' },
            });
        this.loseAll(lost);
        this.abandon();
        throw lost;
      }
      if (e instanceof NoWorkerError) {
        // Admitted on a sample taken while its workers lived; nobody took it, nobody is left to: the
        // same 503 the gate gives, at once, and the job withdrawn (a process that starts later skips it).
        const none = new AppError('face_engine_unavailable', `No ${stage === 'search' ? 'search' : 'face'} worker is running; try again shortly`, {
          retryAfter: this.client.retryAfter ?? 1,
          details: { queue: stage, reason: 'no_worker' },
        });
        this.loseAll(none);
        this.abandon();
        await withdrawWithin(this.client.queue(stage), id);
        throw none;
      }
      if (e instanceof AppError) throw e; // another stage's worker was lost
      if (e instanceof DeadlineError) {
        // Nobody awaits this request's later stages either; a worker that picks one up late skips it.
        this.abandon();
        const withdrawn = await withdrawWithin(this.client.queue(stage), id);
        throw new JobTimeoutError(stage, this.timeoutMs, withdrawn, this.client.retryAfter);
      }
      throw new AppError('face_engine_unavailable', 'The face engine failed to process the request', {
        retryAfter: this.client.retryAfter,
        details: { queue: stage },
        cause: e,
      });
    } finally {
      runner?.stop();
    }
  };
}

export class JobClient {
  private readonly connections: Redis[] = [];
  private readonly queues = new Map<QueueName, Queue>();
  private readonly reader: ReplyReader;
  private readonly admission: JobAdmission | undefined;
  private readonly shardAdmission: ShardAdmission | undefined;
  /** Checks that the processes running awaited stages are alive (./worker-liveness.ts). */
  readonly watch: RunnerWatch | undefined;
  /** Every 503 of a job says when to try again (the fail-fast setting; none without admission). */
  get retryAfter(): number | undefined {
    return this.opts.admission?.retryAfterSeconds;
  }

  private readonly queueConnection: Redis;

  constructor(private readonly opts: JobClientOptions) {
    // One connection for adding jobs to every queue, one for the blocking reply reader. The awaited
    // queues' handles open now (admission samples them); a deferred queue's handle opens on first use.
    this.queueConnection = this.connection();
    for (const name of AWAITED_QUEUE_NAMES) this.queue(name);
    this.reader = new ReplyReader(this.connection(), replyListKey(opts.redisPrefix, randomUUID()));
    this.admission = opts.admission ? new JobAdmission(this.queueConnection, this.queues, opts.admission, opts.admission.onSample) : undefined;
    this.shardAdmission = opts.admission ? new ShardAdmission(this.queueConnection, opts.redisPrefix, opts.admission) : undefined;
    const admission = this.admission;
    this.watch = opts.workerLivenessMs
      ? new RunnerWatch(
          this.queueConnection,
          opts.redisPrefix,
          beatEveryMs(opts.workerLivenessMs),
          undefined,
          admission && ((queue) => admission.workersNow(queue as QueueName, beatEveryMs(opts.workerLivenessMs!))),
        )
      : undefined;
  }

  private connection(): Redis {
    // Neither connection blocks longer than READER_BLOCK_SECONDS: a silent one is made again.
    const c = bullConnection(this.opts.redisUrl, { socketTimeout: STALLED_SOCKET_MS });
    c.on('error', () => {}); // reported through /health and the request that hits it
    this.connections.push(c);
    return c;
  }

  /** The queue's handle (for a deferred queue, what its contract's enqueue function takes). */
  queue(name: QueueName): Queue {
    let queue = this.queues.get(name);
    if (!queue) {
      queue = new Queue(name, { connection: this.queueConnection, prefix: bullPrefix(this.opts.redisPrefix), ...QUEUE_OPTIONS });
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
  async run<Q extends QueueName>(name: Q, payload: JobContracts[Q]['payload'], opts: StartOptions = {}): Promise<JobContracts[Q]['result']> {
    const run = await this.start(name, payload, opts);
    return run.result(name, run.jobId);
  }

  /**
   * Adds the first job of a request's stages and returns a handle on every stage's result. The later
   * stages (`followOns`) are added by the workers themselves (JobContext.followOn) under the ids given
   * here, whose waiters are registered before anything is enqueued, so no reply can be missed; every
   * stage shares the first job's deadline. Admission (fail fast) covers every queue named.
   */
  async start<Q extends QueueName>(name: Q, payload: JobContracts[Q]['payload'], opts: StartOptions = {}): Promise<StagedRun> {
    if (JOB_CONTRACTS[name].delivery !== 'awaited') throw new Error(`queue "${name}" is deferred: enqueue its jobs through its contract, nobody awaits them`);
    const timeoutMs = opts.timeoutMs ?? this.opts.timeoutMs;
    const followOns = opts.followOns ?? [];
    // Before anything is enqueued: a 503 at once rather than a wait nobody will end.
    if (!opts.admitted) await this.admit([name, ...followOns.map((f) => f.queue)]);
    const deadlineAt = Date.now() + timeoutMs;
    // Our own id, so that the waiters are registered before the job exists.
    const jobId = opts.jobId ?? randomUUID();
    const stages = new RunStages(jobId, [{ queue: name, jobId }, ...followOns], this.reader, deadlineAt, timeoutMs, this);
    try {
      await withDeadline(this.enqueue(name, { deadlineAt, payload, replyTo: this.reader.key }, jobId, opts.withValues ?? []), deadlineAt);
    } catch (e) {
      stages.abandon();
      if (!(e instanceof DeadlineError))
        throw new AppError('dependency_unavailable', 'The job queue (Redis) is unavailable', { cause: e, retryAfter: this.retryAfter });
      // The add may still land: withdraw it if it does (best effort; a late worker skips it anyway).
      void this.queue(name)
        .remove(jobId)
        .catch(() => {});
      throw new AppError('dependency_unavailable', 'The job queue (Redis) is unavailable', { retryAfter: this.retryAfter });
    }
    return stages;
  }

  /**
   * The fail-fast gate alone (./admission.ts): resolves when every queue named may take a job now,
   * else throws its 503. Callers ask it before work of their own that only serves the job (decoding
   * and normalising an upload), so that a request with no worker alive is answered in milliseconds;
   * they then tell `start` (`admitted`), which does not ask again: one admission per call.
   */
  async admit(queues: QueueName[]): Promise<void> {
    if (this.admission) await this.admission.admit(queues);
  }

  /**
   * The fail-fast gate of a sharded search (./shard-admission.ts): resolves when every one of `count`
   * shards has a replica reading its consumer group, else throws its 503 (nothing without FAIL_FAST).
   */
  async admitShards(count: number): Promise<void> {
    if (this.shardAdmission) await this.shardAdmission.admit(count);
  }

  /** Writes the job's side values, then adds the job, on one connection: Redis applies them in that order. */
  private async enqueue<Q extends QueueName>(name: Q, envelope: JobEnvelope<Q>, jobId: string, values: { key: string; value: Buffer }[]): Promise<void> {
    const written = values.map(({ key, value }) => this.queueConnection.set(key, value, 'PX', msUntil(envelope.deadlineAt)));
    // The contract of queue Q takes Q's envelope (TypeScript cannot correlate the two through the union).
    const contract = JOB_CONTRACTS[name] as AwaitedJobContract<Q, JobContracts[Q]['payload']>;
    const added = contract.enqueue(this.queue(name), envelope, jobId);
    await Promise.all([...written, added]);
  }

  /**
   * A broadcast (search shards, platform/jobs/search-shards.ts): writes the side values, then ONE
   * stream entry (`fields` names the caller's reply list through `replyTo`), on the queue connection
   * in one round trip, and awaits one reply per id of `replyIds` on this process's reply list until
   * `deadlineAt`. Resolves with every reply in `replyIds` order; rejects with ShardTimeoutError naming
   * the ids with no reply by then (a failed reply rejects at once), and with 503
   * `dependency_unavailable` when Redis is away.
   */
  async broadcast(opts: {
    stream: string;
    maxLen: number;
    /** The entry's one field `m`, given this process's reply list. */
    message: (replyTo: string) => string;
    replyIds: string[];
    withValues: { key: string; value: Buffer }[];
    deadlineAt: number;
  }): Promise<unknown[]> {
    const waiters = opts.replyIds.map((id) => this.reader.wait(id));
    const cancel = () => waiters.forEach((w) => w.cancel());
    try {
      const c = this.queueConnection;
      const written = opts.withValues.map(({ key, value }) => c.set(key, value, 'PX', msUntil(opts.deadlineAt)));
      const added = c.xadd(opts.stream, 'MAXLEN', '~', opts.maxLen, '*', 'm', opts.message(this.reader.key));
      await withDeadline(Promise.all([...written, added]), opts.deadlineAt);
    } catch (e) {
      cancel();
      throw new AppError('dependency_unavailable', 'The job queue (Redis) is unavailable', { cause: e, retryAfter: this.retryAfter ?? 1 });
    }
    const got: unknown[] = new Array(opts.replyIds.length);
    const missing = new Set(opts.replyIds.map((_, i) => i));
    try {
      await withDeadline(
        Promise.all(
          waiters.map((w, i) =>
            w.result.then((r) => {
              got[i] = r;
              missing.delete(i);
            }),
          ),
        ),
        opts.deadlineAt,
      );
      return got;
    } catch (e) {
      if (e instanceof DeadlineError)
        throw new ShardTimeoutError(
          [...missing].map((i) => opts.replyIds[i]!),
          this.retryAfter ?? 1,
        );
      throw e;
    } finally {
      cancel();
    }
  }

  /**
   * Whether this process's own links to the queue answer now: its reader's waits come back and its
   * queue connection answers a PING within `ms`. Throws what failed. (The balancer asks it through
   * /health/ready: a process back from a cut link stays out of service until they do.)
   */
  async linksAnswer(ms = 1000): Promise<void> {
    if (!this.reader.answering) throw new Error('the job reply reader is not answered');
    let timer: NodeJS.Timeout | undefined;
    try {
      await Promise.race([
        this.queueConnection.ping(),
        new Promise((_, reject) => (timer = setTimeout(() => reject(new Error(`the job queue did not answer a PING within ${ms} ms`)), ms))),
      ]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** Counts of jobs per state, for /health and the tests. */
  async counts(name: QueueName): Promise<Record<string, number>> {
    return this.queue(name).getJobCounts('waiting', 'active', 'delayed', 'completed', 'failed', 'prioritized');
  }

  async close(): Promise<void> {
    this.watch?.close();
    await this.reader.close();
    await Promise.allSettled([...this.queues.values()].map((q) => q.close()));
    await Promise.allSettled(this.connections.map((c) => c.quit().catch(() => c.disconnect())));
  }
}
