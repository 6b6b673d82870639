/**
 * Job contract of the `upstream` queue: simulated confirmations from upstream systems that the API
 * does not wait for. Unlike the face queues (request/response through JobClient.run), these jobs are
 * deferred: fire-and-forget and DELAYED. PATCH /users/{id} with a bankAccount stores it as pending and
 * enqueues a `bank-account-confirm` job that lands it after BANK_ACCOUNT_CONFIRM_DELAY_MS.
 *
 * The payload carries no account number (nothing personal sits in Redis for the delay): the worker
 * promotes whatever pending value the user row holds for exactly that request instant, so a job that
 * was superseded by a newer change, or whose user was deleted, does nothing. Processing is idempotent.
 */
import type { Queue } from 'bullmq';
import { deferredJobContract } from './contract.js';

export const UPSTREAM_QUEUE = 'upstream' as const;

export interface BankAccountConfirmJob {
  kind: 'bank-account-confirm';
  userId: string;
  /** ISO instant stored in users.pending_bank_account_requested_at when the change was requested. */
  requestedAt: string;
}

/**
 * The retention sweep (platform/retention/sweep.ts): purges every data family past its retention
 * period and finishes the erasures whose after-commit step failed. Repeatable (a BullMQ job scheduler every
 * RETENTION_SWEEP_INTERVAL_SECONDS): however many upstream workers run, one run at a time is scheduled.
 */
export interface RetentionSweepJob {
  kind: 'retention-sweep';
}

export type UpstreamJob = BankAccountConfirmJob | RetentionSweepJob;

export const RETENTION_SCHEDULER_ID = 'retention-sweep';

/** Creates (or updates) the repeatable retention job. */
export async function scheduleRetentionSweep(queue: Queue, everyMs: number): Promise<void> {
  await queue.upsertJobScheduler(
    RETENTION_SCHEDULER_ID,
    { every: everyMs },
    {
      name: 'retention-sweep',
      data: { kind: 'retention-sweep' } satisfies RetentionSweepJob,
      opts: { removeOnComplete: true, removeOnFail: { age: 7 * 24 * 3600 } },
    },
  );
}

export interface UpstreamResult {
  /** false when the change had been superseded, already applied, or the user deleted. */
  applied: boolean;
  /** A retention sweep: records purged per data family (platform/retention), and erasures finished. */
  purged?: Record<string, number>;
  erasuresFinished?: number;
}

/** The BullMQ job id of a confirmation: one per (user, request instant), so re-enqueueing is a no-op. */
export const bankAccountConfirmJobId = (userId: string, requestedAt: Date) => `bank-${userId}-${requestedAt.getTime()}`;

export const upstreamContract = deferredJobContract<typeof UPSTREAM_QUEUE, UpstreamJob>({
  queue: UPSTREAM_QUEUE,
  jobOptions: {
    // Nobody waits for the result, so a failure (PostgreSQL away for a moment) is retried.
    attempts: 5,
    backoff: { type: 'exponential', delay: 1000 },
    removeOnComplete: true,
    // Kept a week for the queue dashboard; the payload holds no personal data.
    removeOnFail: { age: 7 * 24 * 3600 },
  },
  jobName: (job) => job.kind,
  jobId: (job) => (job.kind === 'bank-account-confirm' ? bankAccountConfirmJobId(job.userId, new Date(job.requestedAt)) : `${job.kind}-${Date.now()}`),
});

/** Enqueues the delayed confirmation of one pending change (idempotent by job id). */
export async function enqueueBankAccountConfirm(queue: Queue, userId: string, requestedAt: Date, delayMs: number): Promise<void> {
  await upstreamContract.enqueue(queue, { kind: 'bank-account-confirm', userId, requestedAt: requestedAt.toISOString() }, { delayMs });
}
