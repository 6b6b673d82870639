/**
 * Job contract of the `upstream` queue: simulated confirmations from upstream systems that the API
 * does not wait for. Unlike the face queues (request/response through JobClient.run), these jobs are
 * fire-and-forget and DELAYED: PATCH /users/{id} with a bankAccount stores it as pending and enqueues
 * a `bank-account-confirm` job that lands it after BANK_ACCOUNT_CONFIRM_DELAY_MS.
 *
 * The payload carries no account number (nothing personal sits in Redis for the delay): the worker
 * promotes whatever pending value the user row holds for exactly that request instant, so a job that
 * was superseded by a newer change, or whose user was deleted, does nothing. Processing is idempotent.
 */
export const UPSTREAM_QUEUE = 'upstream' as const;

export interface BankAccountConfirmJob {
  kind: 'bank-account-confirm';
  userId: string;
  /** ISO instant stored in users.pending_bank_account_requested_at when the change was requested. */
  requestedAt: string;
}

export type UpstreamJob = BankAccountConfirmJob;

export interface UpstreamResult {
  /** false when the change had been superseded, already applied, or the user deleted. */
  applied: boolean;
}

/** The BullMQ job id of a confirmation: one per (user, request instant), so re-enqueueing is a no-op. */
export const bankAccountConfirmJobId = (userId: string, requestedAt: Date) => `bank-${userId}-${requestedAt.getTime()}`;
