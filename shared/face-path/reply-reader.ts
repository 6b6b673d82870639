/**
 * The one blocking reader of an API process's reply list (./replies.ts): every awaited job names the
 * list in its envelope and its worker pushes the result there, so each job costs this process one
 * wake-up, for its own result (BullMQ's events streams, with 4-5 events per job, are not read at all).
 */
import type { Redis } from 'ioredis';
import { parseReply } from './replies.js';

export interface ReplyWaiter {
  result: Promise<unknown>;
  /** Stops waiting: a reply that still comes is dropped. */
  cancel(): void;
}

export class ReplyReader {
  private readonly waiters = new Map<string, { resolve: (v: unknown) => void; reject: (e: Error) => void }>();
  private closing = false;
  private readonly loop: Promise<void>;

  constructor(
    private readonly conn: Redis,
    readonly key: string,
  ) {
    this.loop = this.consume();
  }

  private async consume(): Promise<void> {
    while (!this.closing) {
      let popped: [string, string] | null;
      try {
        // The timeout only bounds how long a closed connection goes unnoticed; replies wake it at once.
        popped = await this.conn.blpop(this.key, 5);
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
