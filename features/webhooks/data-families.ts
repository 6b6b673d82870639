/**
 * The data this wing keeps, declared to the retention registry (platform/retention/README.md): the
 * event outbox with its deliveries and delivery log, kept WEBHOOK_RETENTION_DAYS for replay.
 */
import type { Knex } from 'knex';
import type { DataFamily } from '../../platform/retention/registry.js';
import { WebhooksRepository } from './repository.js';

export function webhookDataFamilies(db: Knex, days: { webhookEvents: number }): DataFamily[] {
  const repo = new WebhooksRepository(db);
  return [
    {
      name: 'webhookEvents',
      store: 'webhook_events (with webhook_deliveries, webhook_delivery_attempts)',
      retention: {
        days: days.webhookEvents,
        rule: 'created_at older than WEBHOOK_RETENTION_DAYS, once dispatched and with no delivery pending',
        purge: (cutoff) => repo.purgeEventsBefore(cutoff),
      },
      // Kept at erasure: an event names the user by id only (the `user.deleted` event is the erasure's own notice).
    },
  ];
}
