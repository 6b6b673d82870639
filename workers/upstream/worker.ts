/**
 * The `upstream` queue's worker: lands the simulated upstream confirmations (today: a bankAccount
 * change, after BANK_ACCOUNT_CONFIRM_DELAY_MS). It needs PostgreSQL and Redis only, no model and no
 * index, so it runs inside the `web` process by default (UPSTREAM_WORKER_IN_WEB=true): the API is the one
 * process that is always deployed, and BullMQ hands each delayed job to exactly one worker however many
 * web replicas run. `workers/upstream/main.ts` runs it as a process of its own instead.
 *
 * A repair sweep (at start and every minute) re-enqueues the confirmation of any pending change whose
 * job is missing (Redis flushed, enqueue failed after the commit): the job id is deterministic, so a
 * job that exists is left alone, and processing is idempotent.
 */
import { Queue, Worker, type Job } from 'bullmq';
import type { Knex } from 'knex';
import type { Config } from '../../shared/config.js';
import { bullPrefix } from '../../shared/job-client.js';
import {
  UPSTREAM_QUEUE,
  bankAccountConfirmJobId,
  type UpstreamJob,
  type UpstreamResult,
} from '../../shared/jobs/upstream.js';
import type { Logger } from '../../shared/logger.js';
import { bullConnection } from '../../shared/redis.js';

const SWEEP_INTERVAL_MS = 60_000;
const SWEEP_BATCH = 500;

export interface RunningUpstreamWorker {
  close(): Promise<void>;
  /** Runs one repair sweep now; returns how many confirmations it (re-)enqueued. */
  sweep(): Promise<number>;
}

/** Applies a pending bankAccount change if it is still the one this job was enqueued for. */
export async function confirmBankAccount(db: Knex, job: { userId: string; requestedAt: string }): Promise<UpstreamResult> {
  return db.transaction(async (trx) => {
    const updated = await trx('users')
      .where({ id: job.userId, pendingBankAccountRequestedAt: new Date(job.requestedAt) })
      .whereNotNull('pendingBankAccount')
      .whereNull('deletedAt')
      .update({
        bankAccount: trx.ref('pendingBankAccount'),
        pendingBankAccount: null,
        pendingBankAccountRequestedAt: null,
        updatedAt: trx.fn.now(),
      })
      .returning(['id']);
    if (updated.length === 0) return { applied: false };
    await trx('auditEvents').insert({
      type: 'profile.bank_account_confirmed',
      severity: 'info',
      actorType: 'system',
      actorId: null,
      subjectType: 'user',
      subjectId: job.userId,
      data: JSON.stringify({ requestedAt: job.requestedAt }),
    });
    return { applied: true };
  });
}

/** Enqueues the delayed confirmation of one pending change (idempotent by job id). */
export async function enqueueBankAccountConfirm(queue: Queue, userId: string, requestedAt: Date, delayMs: number): Promise<void> {
  const payload: UpstreamJob = { kind: 'bank-account-confirm', userId, requestedAt: requestedAt.toISOString() };
  await queue.add(payload.kind, payload, {
    jobId: bankAccountConfirmJobId(userId, requestedAt),
    delay: Math.max(0, delayMs),
    attempts: 5,
    backoff: { type: 'exponential', delay: 1000 },
    removeOnComplete: true,
    removeOnFail: { age: 7 * 24 * 3600 },
  });
}

export function startUpstreamWorker(
  config: Pick<Config, 'redisUrl' | 'redisPrefix' | 'bankAccountConfirmDelayMs'>,
  deps: { db: Knex; logger: Logger },
): RunningUpstreamWorker {
  const prefix = bullPrefix(config.redisPrefix);
  const workerConnection = bullConnection(config.redisUrl);
  const queueConnection = bullConnection(config.redisUrl);
  workerConnection.on('error', () => {});
  queueConnection.on('error', () => {});
  const queue = new Queue(UPSTREAM_QUEUE, { connection: queueConnection, prefix });
  // Redis outages are reported by /health; without a listener BullMQ prints every reconnect error.
  queue.on('error', () => {});

  const worker = new Worker<UpstreamJob, UpstreamResult>(
    UPSTREAM_QUEUE,
    async (job: Job<UpstreamJob, UpstreamResult>) => {
      const data = job.data;
      switch (data.kind) {
        case 'bank-account-confirm': {
          const result = await confirmBankAccount(deps.db, data);
          deps.logger.info({ queue: UPSTREAM_QUEUE, job: data.kind, userId: data.userId, applied: result.applied }, 'upstream confirmation processed');
          return result;
        }
        default:
          throw new Error(`Unknown upstream job kind ${(data as { kind?: string }).kind}`);
      }
    },
    { connection: workerConnection, prefix, concurrency: 4 },
  );
  worker.on('error', (e) => deps.logger.debug({ err: e.message }, 'upstream worker connection error'));
  worker.on('failed', (job, e) => deps.logger.warn({ queue: UPSTREAM_QUEUE, jobId: job?.id, err: e.message }, 'upstream job failed'));

  const sweep = async (): Promise<number> => {
    const rows: { id: string; pendingBankAccountRequestedAt: Date }[] = await deps.db('users')
      .whereNotNull('pendingBankAccount')
      .whereNotNull('pendingBankAccountRequestedAt')
      .whereNull('deletedAt')
      .orderBy('pendingBankAccountRequestedAt')
      .limit(SWEEP_BATCH)
      .select('id', 'pendingBankAccountRequestedAt');
    let enqueued = 0;
    for (const r of rows) {
      const requestedAt = new Date(r.pendingBankAccountRequestedAt);
      const existing = await queue.getJob(bankAccountConfirmJobId(r.id, requestedAt));
      if (existing) continue;
      await enqueueBankAccountConfirm(queue, r.id, requestedAt, requestedAt.getTime() + config.bankAccountConfirmDelayMs - Date.now());
      enqueued++;
    }
    if (enqueued) deps.logger.info({ queue: UPSTREAM_QUEUE, enqueued }, 'upstream repair sweep re-enqueued confirmations');
    return enqueued;
  };
  const runSweep = () => sweep().catch((e: unknown) => deps.logger.debug({ err: (e as Error).message }, 'upstream repair sweep failed'));
  const initial = runSweep();
  const timer = setInterval(runSweep, SWEEP_INTERVAL_MS);
  timer.unref();

  return {
    sweep,
    close: async () => {
      clearInterval(timer);
      await initial;
      await worker.close().catch(() => {});
      await queue.close().catch(() => {});
      for (const c of [workerConnection, queueConnection]) await c.quit().catch(() => c.disconnect());
    },
  };
}
