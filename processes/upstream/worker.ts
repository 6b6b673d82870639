/**
 * The `upstream` queue's worker, the floor's background queue: the retention sweep
 * (platform/retention/sweep.ts), a repeatable job every RETENTION_SWEEP_INTERVAL_SECONDS. It needs
 * PostgreSQL and Redis only, so it runs with the wings' `background` workers (processes/wing-workers.ts):
 * inside the `web` process by default (UPSTREAM_WORKER_IN_WEB, processes/web.ts): the API is the one
 * process that is always deployed, and BullMQ hands each job to exactly one worker however many web
 * replicas run; `processes/upstream.ts` runs them as a process of their own instead.
 */
import type { Knex } from 'knex';
import type { Config } from '../../platform/config.js';
import { UPSTREAM_QUEUE, scheduleRetentionSweep, type UpstreamJob, type UpstreamResult } from '../../platform/jobs/upstream.js';
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

/** Jobs one process runs at once: the sweep runs one at a time anyway (one scheduler). */
const UPSTREAM_CONCURRENCY = 1;

export interface RunningUpstreamWorker {
  close(): Promise<void>;
}

async function upstreamHandler(logger: Logger, job: UpstreamJob, retention: () => Promise<SweepResult>): Promise<UpstreamResult> {
  if (job.kind === 'retention-sweep') {
    const result = await retention();
    logger.info({ queue: UPSTREAM_QUEUE, job: job.kind, purged: result.purged, erasuresFinished: result.erasuresFinished }, 'retention sweep done');
    return { purged: result.purged, erasuresFinished: result.erasuresFinished };
  }
  // A kind this queue no longer carries (a bankAccount confirmation queued before confirmations moved
  // to their wing's own queue): dropped, not retried; the wing's repair sweep queues it again from
  // PostgreSQL, where the pending change is.
  logger.warn({ queue: UPSTREAM_QUEUE, job: (job as { kind?: unknown }).kind }, 'upstream job of a kind this queue no longer carries: dropped');
  return { dropped: true };
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
      [UPSTREAM_QUEUE]: (job) => upstreamHandler(deps.logger, job, () => runRetentionSweep({ db: deps.db, registry, ledger, logger: deps.logger })),
    },
    { logger: deps.logger, concurrency: UPSTREAM_CONCURRENCY },
  );
  if (opts.scheduleRetention ?? true)
    await scheduleRetentionSweep(runner.queue(UPSTREAM_QUEUE), config.protection.retentionSweepIntervalSeconds * 1000).catch((e: unknown) =>
      deps.logger.warn({ err: (e as Error).message }, 'retention job not scheduled (Redis away?); the next start schedules it'),
    );

  return {
    close: async () => {
      await runner.close();
      redis.disconnect();
    },
  };
}
