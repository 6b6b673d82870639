/** objection models of the webhook tables (migrations/20261126000600_webhooks.ts). */
import { Model } from 'objection';

export type WebhookEndpointStatus = 'active' | 'disabled';
export type WebhookDeliveryStatus = 'pending' | 'succeeded' | 'failed';

export class WebhookEndpoint extends Model {
  static override tableName = 'webhook_endpoints';
  // `events` is a PostgreSQL text[] (pg returns it as an array): not a JSON column.
  static override jsonAttributes: string[] = [];
  id!: string;
  url!: string;
  description!: string | null;
  events!: string[];
  status!: WebhookEndpointStatus;
  disabledReason!: 'administrator' | 'gone' | null;
  secretSealed!: string;
  previousSecretSealed!: string | null;
  previousSecretExpiresAt!: Date | null;
  createdBy!: string | null;
  createdAt!: Date;
  updatedAt!: Date;
}

export class WebhookEvent extends Model {
  static override tableName = 'webhook_events';
  static override jsonAttributes = ['data'];
  id!: string;
  type!: string;
  data!: Record<string, unknown>;
  createdAt!: Date;
  dispatchedAt!: Date | null;
}

export class WebhookDelivery extends Model {
  static override tableName = 'webhook_deliveries';
  id!: string;
  eventId!: string;
  endpointId!: string;
  /** The endpoint's URL when the delivery was made (null only for rows older than the column). */
  endpointUrl!: string | null;
  status!: WebhookDeliveryStatus;
  attempts!: number;
  nextAttemptAt!: Date;
  createdAt!: Date;
  updatedAt!: Date;
}

export class WebhookDeliveryAttempt extends Model {
  static override tableName = 'webhook_delivery_attempts';
  id!: string;
  deliveryId!: string;
  endpointId!: string;
  eventId!: string;
  attempt!: number;
  status!: WebhookDeliveryStatus;
  responseStatus!: number | null;
  error!: string | null;
  durationMs!: number | null;
  createdAt!: Date;
}
