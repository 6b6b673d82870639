/**
 * The serving side of a queue's follow-on list (platform/jobs/contract.ts `followOnListKey`): a stage a
 * worker added for another process (a capture's search, added by the face process with the embedding)
 * is one JSON envelope LPUSHed there, taken by one BRPOP of a serving process, and served through the
 * same steps as a BullMQ job (./serve-awaited.ts `serveStage`: skipped if late, runner key, handler,
 * reply). About 9 Redis commands a stage against a BullMQ job's 55-60 (its add, two `moveToActive`,
 * `moveToFinished`, the events stream); docs/performance.md "The follow-on list".
 *
 * What it keeps of a job: the process serving a taken stage is named by its runner key at once, so the
 * caller answers 503 `worker_lost` at once if it dies (./worker-liveness.ts); a stage taken late is
 * skipped; the serving process's own BullMQ Worker on the queue is what the fail-fast gate counts. What
 * it does not: withdrawal (an untaken stage stays in the list until a process takes it and skips it as
 * late: it holds refs and salts only, its probe expired at the deadline) and the queue dashboard.
 */
import type { Redis } from 'ioredis';
import type { ListedStage } from '../jobs/contract.js';

export interface ListTaker {
  /** Takes no more stages (the blocking read in progress ends within its timeout) and waits for the running ones. */
  close(): Promise<void>;
}

/** The blocking read's timeout: how long a close may wait for it. */
const TAKE_BLOCK_SECONDS = 1;

/** Parses a listed stage; null for anything malformed (never throws). */
export function parseListedStage(raw: string): ListedStage<unknown> | null {
  try {
    const s = JSON.parse(raw) as Partial<ListedStage<unknown>>;
    if (typeof s?.id !== 'string' || typeof s.deadlineAt !== 'number' || typeof s.replyTo !== 'string' || s.payload == null) return null;
    return s as ListedStage<unknown>;
  } catch {
    return null;
  }
}

export function takeFollowOns(opts: {
  /** A connection of its own: it blocks. */
  conn: Redis;
  key: string;
  /** Stages served at once by this taker. */
  concurrency: number;
  /** While false, no stage is taken (one taken meanwhile goes back to the list for another process). */
  canTake?: () => boolean;
  serve: (stage: ListedStage<unknown>) => Promise<void>;
  onMalformed: () => void;
}): ListTaker {
  let closing = false;
  const running = new Set<Promise<void>>();
  let slotFreed: (() => void) | undefined;
  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, ms);
      slotFreed = () => {
        clearTimeout(timer);
        resolve();
      };
    });
  const loop = (async () => {
    while (!closing) {
      if (running.size >= opts.concurrency || (opts.canTake && !opts.canTake())) {
        await pause(200);
        continue;
      }
      let popped: [string, string] | null;
      try {
        // LPUSH at the head, taken at the tail: first come, first served.
        popped = await opts.conn.brpop(opts.key, TAKE_BLOCK_SECONDS);
      } catch {
        if (closing) break;
        await pause(200); // Redis away: its callers answer at their deadline
        continue;
      }
      if (!popped) continue;
      if (opts.canTake && !opts.canTake()) {
        await opts.conn.rpush(opts.key, popped[1]).catch(() => {});
        continue;
      }
      const stage = parseListedStage(popped[1]);
      if (!stage) {
        opts.onMalformed();
        continue;
      }
      const served: Promise<void> = opts
        .serve(stage)
        .catch(() => {})
        .finally(() => {
          running.delete(served);
          slotFreed?.();
        });
      running.add(served);
    }
  })();
  return {
    close: async () => {
      closing = true;
      slotFreed?.();
      await loop; // a stage popped by the last read is served, not dropped
      await Promise.allSettled([...running]);
    },
  };
}
