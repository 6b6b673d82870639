/**
 * The deadline every awaited job carries (JobEnvelope.deadlineAt, epoch ms): the API stops waiting at
 * it and withdraws a job no worker has started; a worker that picks a job up later skips it.
 */
import { Job, type Queue } from 'bullmq';

/** The deadline passed before the awaited step finished. */
export class DeadlineError extends Error {
  constructor() {
    super('deadline');
  }
}

/** Milliseconds left until `deadlineAt`, at least 1 (a timer or a Redis PX of 0 would mean "never"). */
export const msUntil = (deadlineAt: number): number => Math.max(1, deadlineAt - Date.now());

/** Settles as `p`, or rejects with DeadlineError when `deadlineAt` comes first. */
export function withDeadline<T>(p: Promise<T>, deadlineAt: number): Promise<T> {
  return new Promise<T>((resolve, reject) => {
    const timer = setTimeout(() => reject(new DeadlineError()), msUntil(deadlineAt));
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

/** Removes a job that no worker has started. Returns false when a worker already holds it (or it never existed). */
export async function withdraw(queue: Queue, jobId: string): Promise<boolean> {
  try {
    const job = await Job.fromId(queue, jobId);
    if (!job) return false;
    const state = await job.getState();
    if (state === 'active') return false;
    await job.remove();
    return true;
  } catch {
    return false;
  }
}
