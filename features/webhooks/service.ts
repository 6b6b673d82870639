/**
 * Webhook endpoints, as administrators manage them: register (the signing secret is shown once, then
 * stored sealed), list, change, disable, delete, rotate the secret (the previous one keeps signing for
 * WEBHOOK_SECRET_OVERLAP_SECONDS), read the delivery log and replay an event. Every change is audited.
 * The deliveries themselves are the webhook worker's (features/webhooks/worker/); events are written by the
 * services whose changes they report (recordWebhookEvent, in the same transaction).
 */
import { randomUUID } from 'node:crypto';
import type { WebhookEndpoint } from '../../models/index.js';
import type { Config } from '../../platform/config.js';
import { parsePrivateCidrs } from './settings.js';
import { AppError } from '../../platform/errors.js';
import type { AuditEventsRepository } from '../../platform/events/audit.js';
import type { UnitOfWork } from '../../platform/database/unit-of-work.js';
import type { WebhookEventType, WebhooksRepository } from './repository.js';
import { newWebhookSecret, sealWebhookSecret } from './secrets.js';
import type { KeyRing } from '../../platform/keys/key-ring.js';
import { BlockedTargetError, checkWebhookUrl } from './sender.js';
import { pageOf, type Page, type PageRequest } from '../../platform/lists/paging.js';

export interface WebhookEndpointView {
  id: string;
  url: string;
  description: string | null;
  events: string[];
  status: 'active' | 'disabled';
  /** Why a disabled endpoint is disabled: an administrator did it, or the receiver answered 410 Gone. */
  disabledReason: 'administrator' | 'gone' | null;
  /** While the previous secret still signs (after a rotation): until when. */
  previousSecretExpiresAt: string | null;
  createdAt: string;
  updatedAt: string;
}

export interface DeliveryAttemptView {
  id: string;
  eventId: string;
  eventType: string;
  attempt: number;
  status: 'succeeded' | 'failed' | 'pending';
  responseStatus: number | null;
  error: string | null;
  createdAt: string;
}

const notFound = () => new AppError('not_found', 'Webhook endpoint not found');

function toView(e: WebhookEndpoint, now = new Date()): WebhookEndpointView {
  const overlapEnds = e.previousSecretExpiresAt ? new Date(e.previousSecretExpiresAt) : null;
  return {
    id: e.id,
    url: e.url,
    description: e.description ?? null,
    events: [...e.events],
    status: e.status,
    disabledReason: e.status === 'disabled' ? (e.disabledReason ?? 'administrator') : null,
    previousSecretExpiresAt: overlapEnds && overlapEnds > now ? overlapEnds.toISOString() : null,
    createdAt: new Date(e.createdAt).toISOString(),
    updatedAt: new Date(e.updatedAt).toISOString(),
  };
}

/** The host only: a webhook URL may carry a token in its path or query, which the audit log must not keep. */
const auditedHost = (url: string) => {
  try {
    return new URL(url).host;
  } catch {
    return null;
  }
};

export class WebhookService {
  constructor(
    private readonly deps: {
      unitOfWork: UnitOfWork;
      auditEvents: AuditEventsRepository;
      webhooks: WebhooksRepository;
      config: Pick<Config, 'webhooks'>;
      /** The key ring endpoint secrets are sealed with (features/webhooks/secrets.ts). */
      keyRing: KeyRing;
    },
  ) {}

  private checkUrl(url: string): void {
    try {
      checkWebhookUrl(url, {
        allowPrivate: this.deps.config.webhooks.allowPrivate,
        privateCidrs: parsePrivateCidrs(this.deps.config.webhooks.privateCidrs),
      });
    } catch (e) {
      if (e instanceof BlockedTargetError) throw new AppError('validation_failed', `url: ${e.message}`, { details: { field: 'url' } });
      throw e;
    }
  }

  async create(
    operatorId: string,
    input: { url: string; events: WebhookEventType[]; description?: string },
  ): Promise<{ endpoint: WebhookEndpointView; secret: string }> {
    this.checkUrl(input.url);
    const id = randomUUID();
    const secret = newWebhookSecret();
    const endpoint = await this.deps.unitOfWork.run(async (trx) => {
      const row = await this.deps.webhooks.insertEndpoint(
        {
          id,
          url: input.url,
          description: input.description?.trim() ? input.description : null,
          events: [...new Set(input.events)],
          secretSealed: sealWebhookSecret(this.deps.keyRing, id, secret),
          createdBy: operatorId,
        },
        trx,
      );
      await this.deps.auditEvents.record(
        {
          type: 'webhook.endpoint_created',
          severity: 'high',
          actorType: 'operator',
          actorId: operatorId,
          subjectType: 'webhook_endpoint',
          subjectId: id,
          data: { host: auditedHost(input.url), events: row.events },
        },
        trx,
      );
      return row;
    });
    return { endpoint: toView(endpoint), secret };
  }

  async list(page: PageRequest): Promise<Page<WebhookEndpointView>> {
    const { rows, total } = await this.deps.webhooks.endpointPage(page);
    return pageOf(
      rows.map((r) => toView(r)),
      page,
      total,
    );
  }

  async get(id: string): Promise<WebhookEndpointView> {
    const row = await this.deps.webhooks.endpoint(id);
    if (!row) throw notFound();
    return toView(row);
  }

  async update(
    operatorId: string,
    id: string,
    patch: { url?: string; events?: WebhookEventType[]; description?: string | null; status?: 'active' | 'disabled' },
  ): Promise<WebhookEndpointView> {
    if (patch.url !== undefined) this.checkUrl(patch.url);
    return this.deps.unitOfWork.run(async (trx) => {
      const before = await this.deps.webhooks.endpoint(id, trx, { forUpdate: true });
      if (!before) throw notFound();
      const updated = (await this.deps.webhooks.updateEndpoint(
        id,
        {
          ...(patch.url !== undefined ? { url: patch.url } : {}),
          ...(patch.events !== undefined ? { events: [...new Set(patch.events)] } : {}),
          ...(patch.description !== undefined ? { description: patch.description?.trim() ? patch.description : null } : {}),
          ...(patch.status !== undefined && patch.status !== before.status
            ? { status: patch.status, disabledReason: patch.status === 'disabled' ? 'administrator' : null }
            : {}),
        },
        trx,
      ))!;
      await this.deps.auditEvents.record(
        {
          type: 'webhook.endpoint_updated',
          severity: patch.url !== undefined ? 'high' : 'info',
          actorType: 'operator',
          actorId: operatorId,
          subjectType: 'webhook_endpoint',
          subjectId: id,
          data: {
            changed: Object.keys(patch),
            ...(patch.url !== undefined ? { host: auditedHost(patch.url) } : {}),
            ...(patch.status !== undefined ? { from: before.status, to: updated.status } : {}),
          },
        },
        trx,
      );
      return toView(updated);
    });
  }

  async remove(operatorId: string, id: string): Promise<void> {
    await this.deps.unitOfWork.run(async (trx) => {
      const before = await this.deps.webhooks.endpoint(id, trx, { forUpdate: true });
      if (!before) throw notFound();
      await this.deps.webhooks.deleteEndpoint(id, trx);
      await this.deps.auditEvents.record(
        {
          type: 'webhook.endpoint_deleted',
          actorType: 'operator',
          actorId: operatorId,
          subjectType: 'webhook_endpoint',
          subjectId: id,
          data: { host: auditedHost(before.url) },
        },
        trx,
      );
    });
  }

  /** A new secret, shown once; the previous one keeps signing (a second signature) for the overlap. */
  async rotateSecret(operatorId: string, id: string): Promise<{ secret: string; previousSecretExpiresAt: string }> {
    const secret = newWebhookSecret();
    const overlapEnds = new Date(Date.now() + this.deps.config.webhooks.secretOverlapSeconds * 1000);
    await this.deps.unitOfWork.run(async (trx) => {
      const before = await this.deps.webhooks.endpoint(id, trx, { forUpdate: true });
      if (!before) throw notFound();
      await this.deps.webhooks.rotateSecret(id, sealWebhookSecret(this.deps.keyRing, id, secret), before.secretSealed, overlapEnds, trx);
      await this.deps.auditEvents.record(
        {
          type: 'webhook.secret_rotated',
          severity: 'high',
          actorType: 'operator',
          actorId: operatorId,
          subjectType: 'webhook_endpoint',
          subjectId: id,
          data: { previousSecretExpiresAt: overlapEnds.toISOString() },
        },
        trx,
      );
    });
    return { secret, previousSecretExpiresAt: overlapEnds.toISOString() };
  }

  async deliveries(id: string, page: PageRequest): Promise<Page<DeliveryAttemptView>> {
    if (!(await this.deps.webhooks.endpoint(id))) throw notFound();
    const { rows, total } = await this.deps.webhooks.attemptPage(id, page);
    return pageOf(
      rows.map((r) => ({
        id: r.id,
        eventId: r.eventId,
        eventType: r.eventType,
        attempt: r.attempt,
        status: r.status,
        responseStatus: r.responseStatus ?? null,
        error: r.error ?? null,
        createdAt: new Date(r.createdAt).toISOString(),
      })),
      page,
      total,
    );
  }

  /**
   * Sends an event again, as it was (same body, same `webhook-id`), to the endpoints it was first sent
   * to (they existed and were subscribed to its type when it was written) that are still active and
   * subscribed: a new delivery each, with its own attempts and schedule (WebhooksRepository.replayEvent).
   */
  async replay(operatorId: string, eventId: string): Promise<{ eventId: string; status: 'queued'; deliveries: number }> {
    return this.deps.unitOfWork.run(async (trx) => {
      if (!(await this.deps.webhooks.event(eventId, trx))) throw new AppError('not_found', 'Webhook event not found');
      const deliveries = await this.deps.webhooks.replayEvent(eventId, trx);
      await this.deps.auditEvents.record(
        {
          type: 'webhook.event_replayed',
          actorType: 'operator',
          actorId: operatorId,
          subjectType: 'webhook_event',
          subjectId: eventId,
          data: { deliveries },
        },
        trx,
      );
      return { eventId, status: 'queued' as const, deliveries };
    });
  }
}
