/**
 * Job contract of the `webhooks` queue, the wing's own (listed by its manifest, registered with the floor's
 * queues by processes/wings.ts): one attempt of one webhook delivery (an event to one endpoint).
 * Deferred: nobody awaits it. The delivery's state lives in PostgreSQL (features/webhooks/repository.ts:
 * attempts made, next attempt due, outcome); a job only says "attempt number N of delivery D is due".
 * The job id is (delivery, attempt), so the dispatcher may queue the same attempt again after a Redis
 * outage or a crash without it running twice: a second run finds the attempt already claimed and does
 * nothing. Retries are new jobs queued by the handler after each wait of the retry schedule, not BullMQ
 * retries: the schedule is a setting and the due time is recorded in PostgreSQL.
 */
import type { Queue } from 'bullmq';
import { deferredJobContract } from '../../platform/jobs/contract.js';

export const WEBHOOK_QUEUE = 'webhooks' as const;

declare module '../../platform/jobs/index.js' {
  interface JobContracts {
    [WEBHOOK_QUEUE]: { payload: WebhookDeliveryJob; result: WebhookDeliveryResult };
  }
}

export interface WebhookDeliveryJob {
  deliveryId: string;
  /** 1 for the first attempt. */
  attempt: number;
}

export interface WebhookDeliveryResult {
  /** What the attempt came to; `skipped`: the attempt was already made or the delivery is over. */
  outcome: 'succeeded' | 'retry' | 'failed' | 'skipped';
}

export const webhookDeliveryJobId = (job: WebhookDeliveryJob) => `whd-${job.deliveryId}-${job.attempt}`;

export const webhookContract = deferredJobContract<typeof WEBHOOK_QUEUE, WebhookDeliveryJob>({
  queue: WEBHOOK_QUEUE,
  jobOptions: {
    // The dispatcher re-queues an attempt whose job failed or vanished once its lease runs out.
    attempts: 1,
    removeOnComplete: true,
    // Kept a day for the queue dashboard; the payload is two ids.
    removeOnFail: { age: 24 * 3600 },
  },
  jobName: () => 'deliver',
  jobId: webhookDeliveryJobId,
});

/** Queues attempt `attempt` of a delivery, due in `delayMs` (idempotent by job id). */
export async function enqueueWebhookDelivery(queue: Queue, job: WebhookDeliveryJob, delayMs: number): Promise<void> {
  await webhookContract.enqueue(queue, job, { delayMs });
}
