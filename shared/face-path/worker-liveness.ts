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
 * A stage taken by a process that is killed before it writes its runner key (a window of one
 * command) is not seen here: it is answered at its deadline, as before.
 */
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { Redis } from 'ioredis';
import type { RedisTarget } from '../redis.js';

/** The liveness key of one worker process. */
export const livenessKey = (redisPrefix: string, processId: string) => `${redisPrefix}:workers:alive:${processId}`;

/** Which process runs (or ran) the awaited job `jobId`. */
export const runnerKey = (redisPrefix: string, jobId: string) => `${redisPrefix}:jobs:runner:${jobId}`;

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

/** A stage's process is gone: answered at once rather than at the deadline. */
export class WorkerLostError extends Error {
  constructor(readonly processId: string) {
    super('the worker process running this stage is gone');
  }
}

/**
 * The API's side: watches the runners of the stages this process awaits, with one poll (two MGETs)
 * every `everyMs` while any is watched, whatever the number of requests.
 */
export class RunnerWatch {
  private readonly watched = new Map<string, (e: WorkerLostError) => void>();
  private timer: NodeJS.Timeout | undefined;
  private polling = false;

  constructor(
    private readonly conn: Redis,
    private readonly redisPrefix: string,
    private readonly everyMs: number,
  ) {}

  /**
   * Rejects with WorkerLostError when the process that started job `jobId` is gone; never resolves.
   * Call the returned `stop` when the stage is no longer awaited.
   */
  watch(jobId: string): { lost: Promise<never>; stop: () => void } {
    const lost = new Promise<never>((_, reject) => this.watched.set(jobId, reject));
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

  private async poll(): Promise<void> {
    if (this.polling || this.watched.size === 0) return; // a slow Redis: one poll at a time
    this.polling = true;
    try {
      const ids = [...this.watched.keys()];
      const runners = await this.conn.mget(ids.map((id) => runnerKey(this.redisPrefix, id)));
      const started = ids.map((id, i) => ({ id, processId: runners[i] })).filter((s): s is { id: string; processId: string } => !!s.processId);
      if (started.length === 0) return;
      const processes = [...new Set(started.map((s) => s.processId))];
      const alive = await this.conn.mget(processes.map((p) => livenessKey(this.redisPrefix, p)));
      const gone = new Set(processes.filter((_, i) => alive[i] == null));
      for (const s of started) {
        if (!gone.has(s.processId)) continue;
        const reject = this.watched.get(s.id);
        this.watched.delete(s.id);
        reject?.(new WorkerLostError(s.processId));
      }
      if (this.watched.size === 0) this.idle();
    } catch {
      // Redis unreachable: the deadline answers these requests, as it would have without the watch.
    } finally {
      this.polling = false;
    }
  }
}
