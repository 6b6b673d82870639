/**
 * One attempt of one webhook delivery, Standard Webhooks v1 on the wire:
 * - body `{ type, timestamp, data }` (timestamp: when the event was written), the same bytes on every
 *   attempt and replay;
 * - `webhook-id`: the event id (the receiver's idempotency key: the same on every retry and replay);
 * - `webhook-timestamp`: when this attempt was signed (seconds), so a receiver can refuse stale replays
 *   of a captured request;
 * - `webhook-signature`: `v1,<base64 HMAC-SHA256 of "id.timestamp.body">`, signed with the npm
 *   `standardwebhooks` package; during a rotation's overlap one signature per live secret, separated
 *   by a space.
 * Outcome: 2xx succeeded; 410 Gone ends the delivery and disables the endpoint; anything else (another
 * status, a timeout, a refused address) is retried after the next wait of the schedule (with ±10%
 * jitter), and after the last one the delivery is `failed`.
 */
import { Webhook } from 'standardwebhooks';
import type { WebhookEndpoint, WebhookEvent } from '../../../models/index.js';
import type { WebhookDeliveryJob } from '../job.js';
import type { WebhooksRepository } from '../repository.js';
import { openWebhookSecret } from '../secrets.js';
import type { KeyRing } from '../../../platform/keys/key-ring.js';
import { sendWebhook, type TargetPolicy } from '../sender.js';

export interface DeliverySettings extends TargetPolicy {
  retryScheduleSeconds: readonly number[];
  timeoutMs: number;
  /** The key ring the endpoint secrets are sealed with (features/webhooks/secrets.ts). */
  keyRing: KeyRing;
}

export interface AttemptReport {
  deliveryId: string;
  attempt: number;
  outcome: 'succeeded' | 'retry' | 'failed';
  responseStatus: number | null;
  /** When outcome is retry: the next attempt and when it is due. */
  next?: { attempt: number; delayMs: number };
}

/** The JSON body of an event: identical on every attempt and replay. */
export function eventBody(event: Pick<WebhookEvent, 'type' | 'createdAt' | 'data'>): string {
  return JSON.stringify({ type: event.type, timestamp: new Date(event.createdAt).toISOString(), data: event.data });
}

/** The secrets that sign now: the current one, and the previous one while its overlap lasts. */
export function liveSecrets(endpoint: WebhookEndpoint, ring: KeyRing, now: Date): string[] {
  const secrets = [openWebhookSecret(ring, endpoint.id, endpoint.secretSealed)];
  if (endpoint.previousSecretSealed && endpoint.previousSecretExpiresAt && new Date(endpoint.previousSecretExpiresAt) > now) {
    secrets.push(openWebhookSecret(ring, endpoint.id, endpoint.previousSecretSealed));
  }
  return secrets;
}

export function signedHeaders(eventId: string, body: string, secrets: string[], at: Date): Record<string, string> {
  const signature = secrets.map((s) => new Webhook(s).sign(eventId, at, body)).join(' ');
  return {
    'webhook-id': eventId,
    'webhook-timestamp': String(Math.floor(at.getTime() / 1000)),
    'webhook-signature': signature,
  };
}

/** The wait before retry number `retry` (1-based), with ±10% jitter; undefined past the schedule. */
export function retryDelayMs(schedule: readonly number[], retry: number, random: () => number = Math.random): number | undefined {
  const seconds = schedule[retry - 1];
  if (seconds === undefined) return undefined;
  return Math.round(seconds * 1000 * (0.9 + 0.2 * random()));
}

/**
 * Runs attempt `job.attempt` of a delivery if it is still due, records it, and says what comes next.
 * Returns undefined when there was nothing to do (a duplicate job, a finished delivery).
 */
export async function attemptDelivery(repo: WebhooksRepository, settings: DeliverySettings, job: WebhookDeliveryJob): Promise<AttemptReport | undefined> {
  // The lease outlasts the attempt's own timeout, so a slow answer is never taken for a lost attempt.
  const claim = await repo.claimAttempt(job.deliveryId, job.attempt, settings.timeoutMs + 30_000);
  if (!claim) return undefined;
  const now = new Date();
  const body = eventBody(claim.event);
  const headers = signedHeaders(claim.event.id, body, liveSecrets(claim.endpoint, settings.keyRing, now), now);
  const sent = await sendWebhook(claim.endpoint.url, headers, body, {
    timeoutMs: settings.timeoutMs,
    allowPrivate: settings.allowPrivate,
    privateCidrs: settings.privateCidrs,
  });

  const ok = sent.status !== null && sent.status >= 200 && sent.status < 300;
  const gone = sent.status === 410;
  const delayMs = ok || gone ? undefined : retryDelayMs(settings.retryScheduleSeconds, job.attempt);
  await repo.finishAttempt(claim, {
    status: ok ? 'succeeded' : 'failed',
    responseStatus: sent.status,
    error: sent.error,
    durationMs: sent.durationMs,
    next: delayMs === undefined ? 'final' : { retryAt: new Date(Date.now() + delayMs) },
    disableEndpoint: gone,
  });
  const base = { deliveryId: job.deliveryId, attempt: job.attempt, responseStatus: sent.status };
  if (ok) return { ...base, outcome: 'succeeded' };
  if (delayMs === undefined) return { ...base, outcome: 'failed' };
  return { ...base, outcome: 'retry', next: { attempt: job.attempt + 1, delayMs } };
}
