/**
 * The `upstream` queue's worker: lands the simulated upstream confirmations (today: a bankAccount
 * change, after BANK_ACCOUNT_CONFIRM_DELAY_MS). It needs PostgreSQL and Redis only, no model and no
 * index, so it runs inside the `web` process by default (UPSTREAM_WORKER_IN_WEB=true, see
 * processes/web.ts): the API is the one process that is always deployed, and BullMQ hands each
 * delayed job to exactly one worker however many web replicas run. `processes/upstream.ts` runs it as
 * a process of its own instead. Its queue is served by the one runner (platform/worker-runtime/run-queue.ts).
 *
 * A repair sweep (at start and every minute) re-enqueues the confirmation of any pending change whose
 * job is missing (Redis flushed, enqueue failed after the commit): the job id is deterministic, so a
 * job that exists is left alone, and processing is idempotent.
 */
import type { Knex } from 'knex';
import type { Config } from '../../platform/config.js';
import {
  UPSTREAM_QUEUE,
  enqueueBankAccountConfirm,
  scheduleRetentionSweep,
  upstreamContract,
  type UpstreamJob,
  type UpstreamResult,
} from '../../platform/jobs/upstream.js';
import { createRedis, keySpace, redisTarget } from '../../platform/redis/redis.js';
import { keyRingOf } from '../../platform/keys/templates.js';
import { runRetentionSweep, type SweepResult } from '../../platform/retention/sweep.js';
import { ErasuresRepository } from '../../features/accounts/erasures-repository.js';
import { BiometricAttemptsStore } from '../../features/face/biometric-attempts-store.js';
import { LivenessSessionStore } from '../../features/liveness/session-store.js';
import { IdentityTokenStore } from '../../features/identity/identity-tokens.js';
import { dataFamilies } from '../data-families.js';
import type { Logger } from '../../platform/logger.js';
import { runQueues } from '../../platform/worker-runtime/run-queue.js';
import { confirmBankAccount, pendingBankAccountChanges } from '../../features/accounts/worker/bank-account-confirmation.js';

const SWEEP_INTERVAL_MS = 60_000;
const SWEEP_BATCH = 500;
/** Confirmations one process lands at once: short PostgreSQL transactions, no CPU to speak of. */
const UPSTREAM_CONCURRENCY = 4;

export interface RunningUpstreamWorker {
  close(): Promise<void>;
  /** Runs one repair sweep now; returns how many confirmations it (re-)enqueued. */
  sweep(): Promise<number>;
}

async function upstreamHandler(db: Knex, logger: Logger, job: UpstreamJob, retention: () => Promise<SweepResult>): Promise<UpstreamResult> {
  switch (job.kind) {
    case 'retention-sweep': {
      const result = await retention();
      logger.info({ queue: UPSTREAM_QUEUE, job: job.kind, purged: result.purged, erasuresFinished: result.erasuresFinished }, 'retention sweep done');
      return { applied: true, purged: result.purged, erasuresFinished: result.erasuresFinished };
    }
    case 'bank-account-confirm': {
      const result = await confirmBankAccount(db, job);
      logger.info({ queue: UPSTREAM_QUEUE, job: job.kind, userId: job.userId, applied: result.applied }, 'upstream confirmation processed');
      return result;
    }
    default:
      throw new Error(`Unknown upstream job kind ${(job as { kind?: string }).kind}`);
  }
}

export interface UpstreamWorkerOptions {
  /**
   * Schedule the retention sweep (default true). Its first run is immediate (a BullMQ `every`
   * scheduler) and the worker starts in the background, so the test harness turns it off unless a
   * test asks for it: fixtures dated in the past would otherwise be purged whenever the start ends.
   */
  scheduleRetention?: boolean;
}

export async function startUpstreamWorker(
  config: Config,
  deps: { db: Knex; logger: Logger },
  opts: UpstreamWorkerOptions = {},
): Promise<RunningUpstreamWorker> {
  // The retention sweep purges the user keys of unfinished erasures: its own connection, to the
  // master the Sentinels name when there are Sentinels (REDIS_URL then carries only the password and
  // the scheme; its host was looked up, in vain, every couple of seconds).
  const redis = createRedis(redisTarget(config.redis));
  redis.on('error', (e) => deps.logger.debug({ err: e.message }, 'redis connection error'));
  const keys = keySpace(config.redis.prefix);
  const registry = dataFamilies({
    db: deps.db,
    config,
    identityTokens: new IdentityTokenStore(redis, keys, keyRingOf(config)),
    biometricAttempts: new BiometricAttemptsStore(redis, keys, config.biometrics),
    livenessSessions: new LivenessSessionStore(redis, keys, keyRingOf(config)),
  });
  const ledger = new ErasuresRepository(deps.db);
  const runner = await runQueues(
    config,
    [UPSTREAM_QUEUE],
    {
      [UPSTREAM_QUEUE]: (job) => upstreamHandler(deps.db, deps.logger, job, () => runRetentionSweep({ db: deps.db, registry, ledger, logger: deps.logger })),
    },
    { logger: deps.logger, concurrency: UPSTREAM_CONCURRENCY },
  );
  const queue = runner.queue(UPSTREAM_QUEUE);
  if (opts.scheduleRetention ?? true)
    await scheduleRetentionSweep(queue, config.protection.retentionSweepIntervalSeconds * 1000).catch((e: unknown) =>
      deps.logger.warn({ err: (e as Error).message }, 'retention job not scheduled (Redis away?); the next start schedules it'),
    );

  const sweep = async (): Promise<number> => {
    let enqueued = 0;
    for (const { userId, requestedAt } of await pendingBankAccountChanges(deps.db, SWEEP_BATCH)) {
      const payload: UpstreamJob = { kind: 'bank-account-confirm', userId, requestedAt: requestedAt.toISOString() };
      if (await queue.getJob(upstreamContract.jobId(payload))) continue;
      await enqueueBankAccountConfirm(queue, userId, requestedAt, requestedAt.getTime() + config.identity.bankAccountConfirmDelayMs - Date.now());
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
      await runner.close();
      redis.disconnect();
    },
  };
}
