/**
 * Job contract of the `bank-account-confirmations` queue, the wing's own (listed by its manifest,
 * registered with the floor's queues by processes/wings.ts): the simulated upstream confirmation of a
 * bankAccount change, which the API does not wait for. PATCH /users/{id} with a bankAccount stores it as
 * pending and enqueues a job that lands it after BANK_ACCOUNT_CONFIRM_DELAY_MS (worker/worker.ts).
 *
 * The payload carries no account number (nothing personal sits in Redis for the delay): the worker
 * promotes whatever pending value the user row holds for exactly that request instant, so a job that
 * was superseded by a newer change, or whose user was deleted, does nothing. Processing is idempotent,
 * and the job id is one per (user, request instant), so enqueueing the same confirmation twice is a no-op.
 */
import type { Queue } from 'bullmq';
import { deferredJobContract, RETRIED_JOB_OPTIONS } from '../../platform/jobs/contract.js';

export const BANK_ACCOUNT_QUEUE = 'bank-account-confirmations' as const;

declare module '../../platform/jobs/index.js' {
  interface JobContracts {
    [BANK_ACCOUNT_QUEUE]: { payload: BankAccountConfirmJob; result: BankAccountConfirmResult };
  }
}

export interface BankAccountConfirmJob {
  userId: string;
  /** ISO instant stored in users.pending_bank_account_requested_at when the change was requested. */
  requestedAt: string;
}

export interface BankAccountConfirmResult {
  /** false when the change had been superseded, already applied, or the user deleted. */
  applied: boolean;
}

/** The BullMQ job id of a confirmation: one per (user, request instant), so re-enqueueing is a no-op. */
export const bankAccountConfirmJobId = (userId: string, requestedAt: Date) => `bank-${userId}-${requestedAt.getTime()}`;

export const bankAccountContract = deferredJobContract<typeof BANK_ACCOUNT_QUEUE, BankAccountConfirmJob>({
  queue: BANK_ACCOUNT_QUEUE,
  jobOptions: RETRIED_JOB_OPTIONS,
  jobName: () => 'confirm',
  jobId: (job) => bankAccountConfirmJobId(job.userId, new Date(job.requestedAt)),
});

/** Enqueues the delayed confirmation of one pending change (idempotent by job id). */
export async function enqueueBankAccountConfirm(queue: Queue, userId: string, requestedAt: Date, delayMs: number): Promise<void> {
  await bankAccountContract.enqueue(queue, { userId, requestedAt: requestedAt.toISOString() }, { delayMs });
}
