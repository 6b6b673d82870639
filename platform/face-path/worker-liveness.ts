/**
 * Which worker process runs a stage, and whether that process is still alive: so that a request whose
 * stage was running on a killed face or search process is answered within seconds (503 with
 * Retry-After), not at its job deadline. BullMQ itself notices such a job only when its lock runs out
 * (30 s, the stalled-job check), long after every deadline.
 *
 * - Every worker process has an id (a new UUID per process) and keeps `<prefix>:workers:alive:<id>`
 *   in Redis with a short PX (`workerLivenessMs`), refreshed three times per period. The refresh runs
 *   on a thread of its own (./liveness-beat.thread.ts): the face models hold the process's main thread
 *   for hundreds of milliseconds at a time (onnxruntime's synchronous run), which must not make a busy
 *   process look dead; a killed process stops refreshing, whatever its threads were doing.
 * - When a stage starts, its worker writes `<prefix>:jobs:runner:<jobId>` = its process id (expiring at
 *   the job's deadline), on the runner's connection without awaiting it, so it costs the stage no
 *   round trip (./serve-awaited.ts).
 * - The API (./job-client.ts) polls, while it awaits stages, every third of the period: one MGET of
 *   the runner keys of every awaited stage of the process, one MGET of the liveness keys they name.
 *   A stage whose runner is named but whose liveness key is gone was lost with its process.
 *
 * - A stage can be taken by a process before its runner key is written: BullMQ moves the next job to
 *   active as it completes one (moveToFinished fetches the next) and while other jobs run
 *   (concurrency), and the job waits in the worker until a slot runs it. For those the API reads the
 *   job's BullMQ lock, whose token begins with the id of the BullMQ Worker holding it; every Worker of
 *   a serving process is named under `<prefix>:workers:bull:<worker id>` = its process id before it
 *   takes a job (platform/worker-runtime/run-queue.ts). So a stage taken but not yet started by a killed process is
 *   answered as quickly as one that had started.
 *
 * A stage whose process, or whose Worker's name, cannot be found is never called lost: it is answered
 * at its deadline, as without the watch.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { Redis } from 'ioredis';
import { bullPrefix } from '../jobs/contract.js';
import type { RedisTarget } from '../redis/redis.js';

/** The liveness key of one worker process. */
export const livenessKey = (redisPrefix: string, processId: string) => `${redisPrefix}:workers:alive:${processId}`;

/** Which process runs (or ran) the awaited job `jobId`. */
export const runnerKey = (redisPrefix: string, jobId: string) => `${redisPrefix}:jobs:runner:${jobId}`;

/** Which process a BullMQ Worker (by its `id`) belongs to. */
export const bullWorkerKey = (redisPrefix: string, bullWorkerId: string) => `${redisPrefix}:workers:bull:${bullWorkerId}`;

/** How long a Worker's name is kept (refreshed daily by its process; a dead process's name goes with it). */
export const BULL_WORKER_NAME_SECONDS = 3 * 24 * 3600;

/**
 * BullMQ's lock of an active job: its value is the token `<worker id>:<counter>` of the Worker holding
 * it. Both are BullMQ internals, checked against the pinned version by test/bullmq-internals.test.ts.
 */
export const lockKey = (redisPrefix: string, queue: string, jobId: string) => `${bullPrefix(redisPrefix)}:${queue}:${jobId}:lock`;
/** The id of the BullMQ Worker a lock token belongs to. */
export const workerIdOfToken = (token: string) => token.slice(0, Math.max(0, token.lastIndexOf(':')));
/** BullMQ's hash of a job (present from its add until it is removed). */
const jobKey = (redisPrefix: string, queue: string, jobId: string) => `${bullPrefix(redisPrefix)}:${queue}:${jobId}`;

/** How often a liveness key is refreshed, and the API polls, for a given period (PX). */
export const beatEveryMs = (livenessMs: number) => Math.max(50, Math.floor(livenessMs / 3));

/**
 * Keeps this process's liveness key in Redis from a thread of its own, until `stop()` (which deletes
 * it: a process that stops cleanly has finished its jobs first).
 */
export class LivenessBeat {
  private constructor(
    private readonly thread: Worker,
    readonly processId: string,
  ) {}

  /** Resolves once the key is first written (or the first attempt failed: the thread keeps trying). */
  static async start(target: RedisTarget, redisPrefix: string, processId: string, livenessMs: number): Promise<LivenessBeat> {
    const thread = new Worker(threadBootstrap(), {
      eval: true,
      workerData: { target, key: livenessKey(redisPrefix, processId), ttlMs: livenessMs, everyMs: beatEveryMs(livenessMs) },
    });
    thread.unref();
    await new Promise<void>((resolve, reject) => {
      thread.once('message', () => resolve());
      thread.once('error', reject);
    });
    return new LivenessBeat(thread, processId);
  }

  async stop(): Promise<void> {
    const stopped = new Promise<void>((resolve) => {
      this.thread.once('message', () => resolve());
      this.thread.once('exit', () => resolve());
    });
    this.thread.postMessage('stop');
    await Promise.race([stopped, new Promise((r) => setTimeout(r, 2000))]);
    await this.thread.terminate();
  }
}

/**
 * The thread's entry: registers tsx (a runtime dependency: the processes run under it) in the thread
 * first, because Node 20 does not hand the process's loader hooks (`--import tsx`) to its threads.
 */
function threadBootstrap(): string {
  const thread = new URL(`./liveness-beat.thread${path.extname(fileURLToPath(import.meta.url))}`, import.meta.url).href;
  const tsx = import.meta.resolve('tsx/esm/api');
  return `import(${JSON.stringify(tsx)}).then((tsx) => { tsx.register(); return import(${JSON.stringify(thread)}); })`;
}

/**
 * A stage's process is gone: answered at once rather than at the deadline. `queueStoreTrouble`: this
 * process's own Redis connection failed shortly before, so the missing liveness key more likely lapsed
 * with Redis (a fail-over: no master to refresh it on) than with the process; the answer is the same
 * 503, under Redis's name rather than the face engine's.
 */
export class WorkerLostError extends Error {
  constructor(
    readonly processId: string,
    readonly queueStoreTrouble = false,
  ) {
    super(queueStoreTrouble ? 'the queue store failed over while this stage ran' : 'the worker process running this stage is gone');
  }
}

/**
 * A stage was admitted while its queue had workers, nobody has taken it, and no worker is on its queue
 * any more (every process serving it was killed, or is restarting and still loading its models): it
 * would wait for its deadline, or for a process that has yet to start.
 */
export class NoWorkerError extends Error {
  constructor(readonly queue: string) {
    super(`no worker is on queue "${queue}" to take this stage`);
  }
}

/** How long after this process's Redis connection failed a lapsed liveness key is put down to Redis. */
export const queueStoreTroubleWindowMs = (livenessMs: number) => Math.max(10_000, 6 * livenessMs);

/**
 * The API's side: watches the runners of the stages this process awaits, with one poll (two MGETs,
 * four while a stage is taken but not started) every `everyMs` while any is watched, whatever the
 * number of requests.
 */
export class RunnerWatch {
  private readonly watched = new Map<string, { queue: string; enqueuedByCaller: boolean; reject: (e: WorkerLostError | NoWorkerError) => void }>();
  private timer: NodeJS.Timeout | undefined;
  private polling = false;
  private connectionTroubleAt = Number.NEGATIVE_INFINITY;

  constructor(
    private readonly conn: Redis,
    private readonly redisPrefix: string,
    private readonly everyMs: number,
    private readonly troubleWindowMs = queueStoreTroubleWindowMs(3 * everyMs),
    /**
     * Workers now on a queue (the fail-fast gate's sample, ./admission.ts): a stage not taken by anyone
     * on a queue with none answers at once (NoWorkerError) rather than at its deadline. Without it
     * (no fail-fast gate), such a stage waits for its deadline.
     */
    private readonly workersOn?: (queue: string) => Promise<number>,
  ) {
    const trouble = () => {
      this.connectionTroubleAt = Date.now();
    };
    conn.on('error', trouble);
    conn.on('reconnecting', trouble);
  }

  /**
   * Rejects with WorkerLostError when the process that started job `jobId` is gone, or NoWorkerError
   * when the caller enqueued it itself (`enqueuedByCaller`: a request's first stage), nobody took it
   * and no worker is left on its queue; never resolves. (A follow-on stage is added by the worker of
   * the stage before it, whose own fate answers the request.)
   * Call the returned `stop` when the stage is no longer awaited.
   */
  watch(jobId: string, queue: string, enqueuedByCaller = false): { lost: Promise<never>; stop: () => void } {
    const lost = new Promise<never>((_, reject) => this.watched.set(jobId, { queue, enqueuedByCaller, reject }));
    lost.catch(() => {});
    this.timer ??= setInterval(() => void this.poll(), this.everyMs);
    return {
      lost,
      stop: () => {
        this.watched.delete(jobId);
        if (this.watched.size === 0) this.idle();
      },
    };
  }

  close(): void {
    this.watched.clear();
    this.idle();
  }

  private idle(): void {
    clearInterval(this.timer);
    this.timer = undefined;
  }

  /** Stages nobody has taken: answered at once when their queue has no worker left. */
  private async orphans(untakenIds: string[]): Promise<void> {
    const untaken = untakenIds.filter((id) => this.watched.get(id)?.enqueuedByCaller);
    if (!this.workersOn || untaken.length === 0) return;
    const queues = [...new Set(untaken.map((id) => this.watched.get(id)?.queue).filter((q): q is string => !!q))];
    const empty = new Set<string>();
    for (const q of queues) if ((await this.workersOn(q)) === 0) empty.add(q);
    if (empty.size === 0) return;
    // Only a stage still in its queue (not answered and removed meanwhile).
    const candidates = untaken.filter((id) => empty.has(this.watched.get(id)?.queue ?? ''));
    const queued = await Promise.all(candidates.map((id) => this.conn.exists(jobKey(this.redisPrefix, this.watched.get(id)!.queue, id))));
    for (const [i, id] of candidates.entries()) {
      const entry = this.watched.get(id);
      if (!entry || queued[i] !== 1) continue;
      this.watched.delete(id);
      entry.reject(new NoWorkerError(entry.queue));
    }
  }

  private async poll(): Promise<void> {
    if (this.polling || this.watched.size === 0) return; // a slow Redis: one poll at a time
    this.polling = true;
    try {
      const ids = [...this.watched.keys()];
      const runners = await this.conn.mget(ids.map((id) => runnerKey(this.redisPrefix, id)));
      const processOf = new Map<string, string>();
      ids.forEach((id, i) => runners[i] && processOf.set(id, runners[i]!));
      // Taken but not started (no runner key yet): the Worker holding the job's lock names the process.
      const unnamed = ids.filter((id) => !processOf.has(id));
      if (unnamed.length > 0) {
        const tokens = await this.conn.mget(unnamed.map((id) => lockKey(this.redisPrefix, this.watched.get(id)!.queue, id)));
        const held = unnamed.map((id, i) => ({ id, workerId: tokens[i] ? workerIdOfToken(tokens[i]!) : '' })).filter((h) => h.workerId);
        await this.orphans(unnamed.filter((_, i) => !tokens[i]));
        if (held.length > 0) {
          const names = await this.conn.mget(held.map((h) => bullWorkerKey(this.redisPrefix, h.workerId)));
          held.forEach((h, i) => names[i] && processOf.set(h.id, names[i]!));
        }
      }
      if (processOf.size === 0) return;
      const processes = [...new Set(processOf.values())];
      const alive = await this.conn.mget(processes.map((p) => livenessKey(this.redisPrefix, p)));
      const gone = new Set(processes.filter((_, i) => alive[i] == null));
      const redisTrouble = Date.now() - this.connectionTroubleAt < this.troubleWindowMs;
      for (const [id, processId] of processOf) {
        if (!gone.has(processId)) continue;
        const entry = this.watched.get(id);
        this.watched.delete(id);
        entry?.reject(new WorkerLostError(processId, redisTrouble));
      }
      if (this.watched.size === 0) this.idle();
    } catch {
      // Redis unreachable: the deadline answers these requests, as it would have without the watch.
    } finally {
      this.polling = false;
    }
  }
}
