/**
 * The `bank-account-confirmations` queue's worker (a `background` worker of the manifest): lands the
 * simulated upstream confirmations of bankAccount changes, after BANK_ACCOUNT_CONFIRM_DELAY_MS. It needs
 * PostgreSQL and Redis only, so it runs where the background queues run: inside the `web` process by
 * default (UPSTREAM_WORKER_IN_WEB), or in the `upstream` process.
 *
 * A repair sweep (at start and every minute) re-enqueues the confirmation of any pending change whose
 * job is missing (Redis flushed, the enqueue failed after the commit, a job queued by a version that
 * carried confirmations on the `upstream` queue): the job id is deterministic, so a job that exists is
 * left alone, and processing is idempotent.
 */
import type { BackgroundWorkerDeps, RunningWingWorker } from '../../../platform/wing.js';
import { runQueues } from '../../../platform/worker-runtime/run-queue.js';
import { BANK_ACCOUNT_QUEUE, bankAccountContract, enqueueBankAccountConfirm, type BankAccountConfirmJob } from '../job.js';
import { confirmBankAccount, pendingBankAccountChanges } from './bank-account-confirmation.js';

const SWEEP_INTERVAL_MS = 60_000;
const SWEEP_BATCH = 500;
/** Confirmations one process lands at once: short PostgreSQL transactions, no CPU to speak of. */
const CONCURRENCY = 4;

export interface RunningBankAccountWorker extends RunningWingWorker {
  /** Runs one repair sweep now; returns how many confirmations it (re-)enqueued. */
  sweep(): Promise<number>;
}

export async function startBankAccountWorker(deps: BackgroundWorkerDeps): Promise<RunningBankAccountWorker> {
  const { config, db, logger } = deps;
  const runner = await runQueues(
    config,
    [BANK_ACCOUNT_QUEUE],
    {
      [BANK_ACCOUNT_QUEUE]: async (job) => {
        const result = await confirmBankAccount(db, job);
        logger.info({ queue: BANK_ACCOUNT_QUEUE, userId: job.userId, applied: result.applied }, 'bankAccount confirmation processed');
        return result;
      },
    },
    { logger, concurrency: CONCURRENCY },
  );
  const queue = runner.queue(BANK_ACCOUNT_QUEUE);

  const sweep = async (): Promise<number> => {
    let enqueued = 0;
    for (const { userId, requestedAt } of await pendingBankAccountChanges(db, SWEEP_BATCH)) {
      const payload: BankAccountConfirmJob = { userId, requestedAt: requestedAt.toISOString() };
      if (await queue.getJob(bankAccountContract.jobId(payload))) continue;
      await enqueueBankAccountConfirm(queue, userId, requestedAt, requestedAt.getTime() + config.identity.bankAccountConfirmDelayMs - Date.now());
      enqueued++;
    }
    if (enqueued) logger.info({ queue: BANK_ACCOUNT_QUEUE, enqueued }, 'repair sweep re-enqueued bankAccount confirmations');
    return enqueued;
  };
  const runSweep = () => sweep().catch((e: unknown) => logger.debug({ err: (e as Error).message }, 'bankAccount repair sweep failed'));
  const initial = runSweep();
  const timer = setInterval(runSweep, SWEEP_INTERVAL_MS);
  timer.unref();

  return {
    sweep,
    close: async () => {
      clearInterval(timer);
      await initial;
      await runner.close();
    },
  };
}
