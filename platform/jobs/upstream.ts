/**
 * Job contract of the `upstream` queue, the floor's background queue: the retention sweep
 * (platform/retention/sweep.ts), which purges every data family past its retention period and finishes
 * the erasures whose after-commit step failed. Repeatable (a BullMQ job scheduler every
 * RETENTION_SWEEP_INTERVAL_SECONDS): however many upstream workers run, one run at a time is scheduled.
 * Deferred: nobody awaits it. A wing's own deferred work has a queue of its own, in its folder
 * (features/accounts/job.ts, features/webhooks/job.ts).
 */
import type { Queue } from 'bullmq';
import { deferredJobContract, RETRIED_JOB_OPTIONS } from './contract.js';

export const UPSTREAM_QUEUE = 'upstream' as const;

export interface RetentionSweepJob {
  kind: 'retention-sweep';
}

export type UpstreamJob = RetentionSweepJob;

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
  /** Records purged per data family (platform/retention). */
  purged?: Record<string, number>;
  /** Erasures finished. */
  erasuresFinished?: number;
  /** A job of a kind the queue no longer carries, dropped (processes/upstream/worker.ts). */
  dropped?: true;
}

export const upstreamContract = deferredJobContract<typeof UPSTREAM_QUEUE, UpstreamJob>({
  queue: UPSTREAM_QUEUE,
  jobOptions: RETRIED_JOB_OPTIONS,
  jobName: (job) => job.kind,
  jobId: (job) => `${job.kind}-${Date.now()}`,
});
