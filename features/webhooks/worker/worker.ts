/**
 * The `webhooks` queue's worker and the outbox dispatcher, the wing's `background` worker (its
 * manifest): it needs PostgreSQL and Redis only, so it runs where the background queues run: inside the
 * `web` process by default (UPSTREAM_WORKER_IN_WEB), or in the `upstream` process
 * (processes/wing-workers.ts starts it in either).
 *
 * The dispatcher, every WEBHOOK_DISPATCH_INTERVAL_MS:
 * 1. fans new outbox events out to the subscribed endpoints (one delivery each, in PostgreSQL) and
 *    queues their first attempts;
 * 2. re-queues every pending delivery whose next attempt is due: an attempt whose job was lost (Redis
 *    down when it was queued, Redis flushed, a process killed mid-attempt once its lease ran out) is
 *    queued again. Job ids are (delivery, attempt), and an attempt runs only if PostgreSQL says it is
 *    the next one, so re-queueing what already exists is harmless.
 * Events older than WEBHOOK_RETENTION_DAYS are deleted by the one retention sweep (the `webhookEvents`
 * family, features/webhooks/data-families.ts), not here.
 * While Redis is away, step 1 still runs (the deliveries wait in PostgreSQL) and step 2 queues them when
 * it is back: no event is lost.
 */
import type { Knex } from 'knex';
import type { Config } from '../../../platform/config.js';
import { parsePrivateCidrs, parseRetrySchedule } from '../settings.js';
import { enqueueWebhookDelivery, WEBHOOK_QUEUE, type WebhookDeliveryJob, type WebhookDeliveryResult } from '../job.js';
import type { Logger } from '../../../platform/logger.js';
import { WebhooksRepository } from '../repository.js';
import type { KeyRing } from '../../../platform/keys/key-ring.js';
import { runQueues } from '../../../platform/worker-runtime/run-queue.js';
import { attemptDelivery, type AttemptReport } from './delivery.js';
import type { BackgroundWorkerDeps } from '../../../platform/wing.js';
import { WEBHOOK_METRICS } from '../metrics.js';

/** Attempts one process sends at once: each mostly waits on a receiver (up to WEBHOOK_TIMEOUT_MS). */
const WEBHOOK_CONCURRENCY = 8;
const DISPATCH_BATCH = 200;

export interface RunningWebhookWorker {
  /** One dispatcher pass now (tests); returns how many attempts it queued. */
  dispatch(): Promise<number>;
  close(): Promise<void>;
}

export interface WebhookWorkerDeps {
  db: Knex;
  logger: Logger;
  /** The key ring endpoint secrets are sealed with. */
  keyRing: KeyRing;
  /** Called after every attempt (metrics). */
  onAttempt?: (report: AttemptReport) => void;
}

/** The wing's `background` worker (its manifest): the deliveries, their attempts counted where the process keeps metrics. */
export function webhookBackgroundWorker(deps: BackgroundWorkerDeps): Promise<RunningWebhookWorker> {
  const { metrics } = deps;
  return startWebhookWorker(deps.config, {
    db: deps.db,
    logger: deps.logger,
    keyRing: deps.keyRing,
    onAttempt: metrics ? (report) => metrics.counter(WEBHOOK_METRICS.attempts).inc({ outcome: report.outcome }) : undefined,
  });
}

export async function startWebhookWorker(config: Config, deps: WebhookWorkerDeps): Promise<RunningWebhookWorker> {
  const repo = new WebhooksRepository(deps.db);
  const settings = {
    retryScheduleSeconds: parseRetrySchedule(config.webhooks.retryScheduleSeconds) ?? [],
    timeoutMs: config.webhooks.timeoutMs,
    allowPrivate: config.webhooks.allowPrivate,
    privateCidrs: parsePrivateCidrs(config.webhooks.privateCidrs),
    keyRing: deps.keyRing,
  };
  const log = deps.logger.child({ queue: WEBHOOK_QUEUE });

  const runner = await runQueues(
    config,
    [WEBHOOK_QUEUE],
    {
      [WEBHOOK_QUEUE]: async (job: WebhookDeliveryJob): Promise<WebhookDeliveryResult> => {
        const report = await attemptDelivery(repo, settings, job);
        if (!report) return { outcome: 'skipped' };
        // Ids and statuses only: never the body, a header or a secret.
        log.info({ deliveryId: report.deliveryId, attempt: report.attempt, outcome: report.outcome, responseStatus: report.responseStatus }, 'webhook attempt');
        deps.onAttempt?.(report);
        if (report.next) {
          // If this add is lost, the dispatcher queues the attempt when it falls due (PostgreSQL has it).
          await enqueueWebhookDelivery(runner.queue(WEBHOOK_QUEUE), { deliveryId: report.deliveryId, attempt: report.next.attempt }, report.next.delayMs).catch(
            () => {},
          );
        }
        return { outcome: report.outcome };
      },
    },
    { logger: deps.logger, concurrency: WEBHOOK_CONCURRENCY },
  );
  const queue = runner.queue(WEBHOOK_QUEUE);

  let running: Promise<number> | undefined;
  const dispatchOnce = async (): Promise<number> => {
    let queued = 0;
    for (const deliveryId of await repo.dispatchEvents(DISPATCH_BATCH)) {
      // Best effort: a delivery not queued now is due, and step 2 below (or the next pass) queues it.
      await enqueueWebhookDelivery(queue, { deliveryId, attempt: 1 }, 0).then(
        () => queued++,
        () => {},
      );
    }
    for (const d of await repo.dueDeliveries(DISPATCH_BATCH)) {
      await enqueueWebhookDelivery(queue, { deliveryId: d.id, attempt: d.attempts + 1 }, 0);
      queued++;
    }
    return queued;
  };
  // One pass at a time per process.
  const dispatch = (): Promise<number> => {
    running ??= dispatchOnce().finally(() => {
      running = undefined;
    });
    return running;
  };
  const tick = () => dispatch().catch((e: unknown) => log.debug({ err: (e as Error).message }, 'webhook dispatch pass failed'));
  const timer = setInterval(tick, config.webhooks.dispatchIntervalMs);
  timer.unref();
  void tick();

  return {
    dispatch,
    close: async () => {
      clearInterval(timer);
      await running?.catch(() => {});
      await runner.close();
    },
  };
}
