/**
 * Webhooks in PostgreSQL: the endpoints, the event outbox, the deliveries (one per event, endpoint and
 * round: a replay is a new round) and the log of their attempts.
 *
 * The outbox: recording a public event of the event map (platform/events/map.ts) writes its row here in
 * the transaction of the change the event reports, with its AuditEvent, so an event exists exactly when
 * its change committed: a Redis outage or a crash can neither lose one nor invent one. The dispatcher (features/webhooks/worker/) fans each new event out to
 * the endpoints subscribed to its type and queues the attempts; everything a delivery needs to resume
 * (attempts made, when the next is due) is here, so BullMQ only times the attempts.
 *
 * Payloads are thin: ids, outcomes and statuses. The map's PublicEventPayloads is the contract of what
 * may travel: never a face, a template, a NIN/BVN, a name, a phone or an account number.
 */
import {
  WebhookDelivery,
  WebhookDeliveryAttempt,
  WebhookEndpoint,
  WebhookEvent,
  type WebhookDeliveryStatus,
  type WebhookEndpointStatus,
} from '../../models/index.js';
import { Repository, type Db, type Tx } from '../../platform/database/unit-of-work.js';
import { onePage } from '../../platform/lists/paging.js';

/** The event types an endpoint may subscribe to, and the data each carries: the public events of the event map (one source). */
export { PUBLIC_EVENT_TYPES as WEBHOOK_EVENT_TYPES } from '../../platform/events/map.js';
export type { PublicEventName as WebhookEventType, PublicEventPayloads as WebhookEventData } from '../../platform/events/map.js';

export interface EndpointInsert {
  id: string;
  url: string;
  description: string | null;
  events: string[];
  secretSealed: string;
  createdBy: string | null;
}

export interface EndpointPatch {
  url?: string;
  description?: string | null;
  events?: string[];
  status?: WebhookEndpointStatus;
  disabledReason?: 'administrator' | 'gone' | null;
}

/** What one attempt needs: the delivery, its event and its endpoint (with the sealed secrets). */
export interface ClaimedAttempt {
  attemptId: string;
  delivery: WebhookDelivery;
  event: WebhookEvent;
  endpoint: WebhookEndpoint;
}

export interface AttemptRow {
  id: string;
  eventId: string;
  eventType: string;
  attempt: number;
  status: WebhookDeliveryStatus;
  responseStatus: number | null;
  error: string | null;
  createdAt: Date;
}

/** How an attempt ended, and what becomes of its delivery. */
export interface AttemptOutcome {
  status: 'succeeded' | 'failed';
  responseStatus: number | null;
  error: string | null;
  durationMs: number;
  /** `retryAt`: the next attempt is due then; `final`: the delivery is over with the attempt's status. */
  next: { retryAt: Date } | 'final';
  /** The receiver answered 410 Gone: the endpoint is disabled (no further deliveries). */
  disableEndpoint?: boolean;
}

const endpointColumns = [
  'id',
  'url',
  'description',
  'events',
  'status',
  'disabledReason',
  'secretSealed',
  'previousSecretSealed',
  'previousSecretExpiresAt',
  'createdBy',
  'createdAt',
  'updatedAt',
] as const;

/**
 * Every transaction that writes an endpoint's deliveries or attempts locks the endpoint's row first
 * (`FOR KEY SHARE`: workers do not wait for one another). Deleting an endpoint locks that row `FOR
 * UPDATE` and then deletes its deliveries and attempts (the foreign keys' cascade); a worker that had
 * locked an attempt and then waited for its delivery, while the deletion held the delivery and waited
 * for the attempt, was a deadlock (PostgreSQL 40P01), and the DELETE's answer a 500. Taken first, the
 * endpoint's row makes the two wait for each other instead; a row gone by then leaves nothing to write.
 */
async function lockEndpointFirst(trx: Tx, endpointId: string): Promise<void> {
  await trx(WebhookEndpoint.tableName).where({ id: endpointId }).forKeyShare().first('id');
}

export class WebhooksRepository extends Repository {
  // ---- endpoints ----

  async insertEndpoint(e: EndpointInsert, trx?: Db): Promise<WebhookEndpoint> {
    const [row] = await this.on(trx)(WebhookEndpoint.tableName)
      .insert(e)
      .returning([...endpointColumns]);
    return row as WebhookEndpoint;
  }

  async endpoint(id: string, trx?: Db, opts: { forUpdate?: boolean } = {}): Promise<WebhookEndpoint | undefined> {
    const q = this.on(trx)(WebhookEndpoint.tableName)
      .where({ id })
      .first([...endpointColumns]);
    if (opts.forUpdate) q.forUpdate();
    return (await q) as WebhookEndpoint | undefined;
  }

  async endpointPage(page: { page: number; pageSize: number }): Promise<{ rows: WebhookEndpoint[]; total: number }> {
    const [rows, [{ total }]] = await Promise.all([
      this.db(WebhookEndpoint.tableName)
        .select([...endpointColumns])
        .orderBy([
          { column: 'createdAt', order: 'desc' },
          { column: 'id', order: 'desc' },
        ])
        .modify(onePage, page),
      this.db(WebhookEndpoint.tableName).count({ total: '*' }),
    ]);
    return { rows: rows as WebhookEndpoint[], total: Number(total) };
  }

  async updateEndpoint(id: string, patch: EndpointPatch, trx?: Db): Promise<WebhookEndpoint | undefined> {
    const [row] = await this.on(trx)(WebhookEndpoint.tableName)
      .where({ id })
      .update({ ...patch, updatedAt: this.db.fn.now() })
      .returning([...endpointColumns]);
    return row as WebhookEndpoint | undefined;
  }

  /** Replaces the secret; the previous one keeps signing until `previousExpiresAt`. */
  async rotateSecret(id: string, secretSealed: string, previousSecretSealed: string, previousExpiresAt: Date, trx?: Db): Promise<void> {
    await this.on(trx)(WebhookEndpoint.tableName)
      .where({ id })
      .update({ secretSealed, previousSecretSealed, previousSecretExpiresAt: previousExpiresAt, updatedAt: this.db.fn.now() });
  }

  /** Deletes an endpoint with its deliveries and their log. */
  async deleteEndpoint(id: string, trx?: Db): Promise<boolean> {
    return (await this.on(trx)(WebhookEndpoint.tableName).where({ id }).del()) > 0;
  }

  // ---- events and the dispatcher ----

  async event(id: string, trx?: Db): Promise<WebhookEvent | undefined> {
    return (await this.on(trx)(WebhookEvent.tableName).where({ id }).first()) as WebhookEvent | undefined;
  }

  /**
   * Fans up to `limit` undispatched events out to the active endpoints subscribed to their type (that
   * existed when the event was written), in one transaction, and marks them dispatched. Several
   * dispatchers (one per web process) never take the same event: SKIP LOCKED. Returns the new
   * deliveries, each due at once.
   */
  async dispatchEvents(limit: number): Promise<string[]> {
    const { rows } = (await this.db.raw(
      `WITH ev AS (
         SELECT id, type, created_at FROM webhook_events
          WHERE dispatched_at IS NULL ORDER BY created_at LIMIT ? FOR UPDATE SKIP LOCKED
       ), ins AS (
         INSERT INTO webhook_deliveries (event_id, endpoint_id, endpoint_url)
         SELECT ev.id, e.id, e.url FROM ev JOIN webhook_endpoints e
           ON e.status = 'active' AND ev.type = ANY (e.events) AND e.created_at <= ev.created_at
         RETURNING id
       ), upd AS (
         UPDATE webhook_events SET dispatched_at = now() WHERE id IN (SELECT id FROM ev)
       )
       SELECT id FROM ins`,
      [limit],
    )) as { rows: { id: string }[] };
    return rows.map((r) => r.id);
  }

  /** Pending deliveries whose next attempt is due (or whose running attempt's lease ran out). */
  async dueDeliveries(limit: number): Promise<{ id: string; attempts: number }[]> {
    return this.db(WebhookDelivery.tableName)
      .where({ status: 'pending' })
      .andWhere('nextAttemptAt', '<=', this.db.fn.now())
      .orderBy('nextAttemptAt')
      .limit(limit)
      .select('id', 'attempts');
  }

  /**
   * New deliveries of an event (a replay) to the endpoints that were sent it when it was written: those
   * the dispatcher fanned it out to (they existed and were subscribed to its type then), provided they
   * are still active and still subscribed, and only while the endpoint's URL is the one that first
   * delivery went to (an administrator, or a stolen administrator session, who changes the URL cannot
   * then replay the history to the new address). An endpoint created or subscribed afterwards never receives
   * it, since a replay must not widen who learns of an event. An event not yet dispatched has no such
   * endpoints yet: the dispatcher delivers it.
   */
  async replayEvent(eventId: string, trx?: Db): Promise<number> {
    const { rows } = (await this.on(trx).raw(
      `INSERT INTO webhook_deliveries (event_id, endpoint_id, endpoint_url)
       SELECT ev.id, e.id, e.url FROM webhook_events ev
         JOIN webhook_endpoints e ON e.status = 'active' AND ev.type = ANY (e.events)
        WHERE ev.id = ?
          AND EXISTS (SELECT 1 FROM webhook_deliveries d WHERE d.event_id = ev.id AND d.endpoint_id = e.id AND d.endpoint_url = e.url)
       RETURNING id`,
      [eventId],
    )) as { rows: { id: string }[] };
    return rows.length;
  }

  /**
   * Claims attempt `attempt` of a delivery: only when it is the next one and the delivery is pending,
   * so a job queued twice runs once. The claim holds a lease (`leaseMs`): if this process dies during
   * the attempt, the dispatcher finds the delivery due again after it and queues the next attempt.
   * Returns undefined when there is nothing to do; a delivery whose endpoint is gone or disabled ends
   * as `failed` without an attempt.
   */
  async claimAttempt(deliveryId: string, attempt: number, leaseMs: number): Promise<ClaimedAttempt | undefined> {
    return this.db.transaction(async (trx) => {
      // The endpoint's row first (`lockEndpointFirst`), then the delivery's.
      const owner = (await trx(WebhookDelivery.tableName).where({ id: deliveryId }).first('endpointId')) as { endpointId: string } | undefined;
      if (!owner) return undefined;
      await lockEndpointFirst(trx, owner.endpointId);
      const delivery = (await trx(WebhookDelivery.tableName).where({ id: deliveryId }).forUpdate().first()) as WebhookDelivery | undefined;
      if (!delivery || delivery.status !== 'pending' || delivery.attempts !== attempt - 1) return undefined;
      const endpoint = await this.endpoint(delivery.endpointId, trx);
      // An event goes only to the address its delivery was made for: a URL changed since (before a
      // retry, or before a queued replay's attempt) ends the delivery unsent.
      const moved = endpoint && delivery.endpointUrl != null && endpoint.url !== delivery.endpointUrl;
      if (!endpoint || endpoint.status !== 'active' || moved) {
        await trx(WebhookDelivery.tableName).where({ id: deliveryId }).update({ status: 'failed', updatedAt: trx.fn.now() });
        return undefined;
      }
      const event = (await this.event(delivery.eventId, trx))!;
      await trx(WebhookDelivery.tableName)
        .where({ id: deliveryId })
        .update({ attempts: attempt, nextAttemptAt: trx.raw(`now() + make_interval(secs => ?)`, [leaseMs / 1000]), updatedAt: trx.fn.now() });
      // An earlier attempt still pending was interrupted (its process died): it failed without an answer.
      await trx(WebhookDeliveryAttempt.tableName)
        .where({ deliveryId, status: 'pending' })
        .update({ status: 'failed', error: 'interrupted: no outcome was recorded (process stopped)' });
      const [row] = await trx(WebhookDeliveryAttempt.tableName)
        .insert({ deliveryId, endpointId: endpoint.id, eventId: event.id, attempt, status: 'pending' })
        .returning('id');
      return { attemptId: (row as { id: string }).id, delivery: { ...delivery, attempts: attempt } as WebhookDelivery, event, endpoint };
    });
  }

  /** Records how an attempt ended, and the delivery's next step, in one transaction. */
  async finishAttempt(claim: ClaimedAttempt, outcome: AttemptOutcome): Promise<void> {
    await this.db.transaction(async (trx) => {
      // The endpoint's row, then the delivery's, then the attempt's: the order of its deletion.
      await lockEndpointFirst(trx, claim.endpoint.id);
      await trx(WebhookDelivery.tableName)
        .where({ id: claim.delivery.id })
        .update(
          outcome.next === 'final' ? { status: outcome.status, updatedAt: trx.fn.now() } : { nextAttemptAt: outcome.next.retryAt, updatedAt: trx.fn.now() },
        );
      await trx(WebhookDeliveryAttempt.tableName).where({ id: claim.attemptId }).update({
        status: outcome.status,
        responseStatus: outcome.responseStatus,
        error: outcome.error,
        durationMs: outcome.durationMs,
      });
      if (outcome.disableEndpoint) {
        await trx(WebhookEndpoint.tableName)
          .where({ id: claim.endpoint.id, status: 'active' })
          .update({ status: 'disabled', disabledReason: 'gone', updatedAt: trx.fn.now() });
      }
    });
  }

  /**
   * Deletes events older than `days` (with their deliveries and attempts) once none of their deliveries
   * is pending and they have been dispatched. Returns how many events went.
   */
  async purgeEvents(days: number): Promise<number> {
    return this.purgeEventsBefore(new Date(Date.now() - days * 86_400_000));
  }

  /** Deletes the dispatched events created before `cutoff` with no delivery pending (their deliveries and log go with them). */
  async purgeEventsBefore(cutoff: Date): Promise<number> {
    return this.db(WebhookEvent.tableName)
      .where('createdAt', '<', cutoff)
      .whereNotNull('dispatchedAt')
      .whereNotExists(this.db(WebhookDelivery.tableName).whereRaw('webhook_deliveries.event_id = webhook_events.id').where({ status: 'pending' }))
      .del();
  }

  // ---- the delivery log ----

  async attemptPage(endpointId: string, page: { page: number; pageSize: number }): Promise<{ rows: AttemptRow[]; total: number }> {
    const base = () => this.db(`${WebhookDeliveryAttempt.tableName} as a`).where('a.endpointId', endpointId);
    const [rows, [{ total }]] = await Promise.all([
      base()
        .join(`${WebhookEvent.tableName} as ev`, 'ev.id', 'a.eventId')
        .select('a.id', 'a.eventId', 'ev.type as eventType', 'a.attempt', 'a.status', 'a.responseStatus', 'a.error', 'a.createdAt')
        .orderBy([
          { column: 'a.createdAt', order: 'desc' },
          { column: 'a.id', order: 'desc' },
        ])
        .modify(onePage, page),
      base().count({ total: '*' }),
    ]);
    return { rows: rows as AttemptRow[], total: Number(total) };
  }
}
