/**
 * Webhooks (docs/webhooks.md): the endpoints administrators register, the event outbox written in the
 * same transaction as the change an event reports, one delivery per (event, endpoint, round) and one
 * log row per attempt. PostgreSQL holds the whole delivery state; Redis (BullMQ) only times the attempts,
 * so a Redis outage delays deliveries and never loses one.
 */
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('webhook_endpoints', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.text('url').notNullable();
    t.text('description');
    t.specificType('events', 'text[]').notNullable();
    t.text('status').notNullable().defaultTo('active'); // active | disabled
    t.text('disabled_reason'); // administrator | gone (the receiver answered 410)
    // The signing secret, sealed (AES-256-GCM, endpoint id as associated data); never in clear.
    t.text('secret_sealed').notNullable();
    // During a rotation's overlap the previous secret still signs, until previous_secret_expires_at.
    t.text('previous_secret_sealed');
    t.timestamp('previous_secret_expires_at', { useTz: true });
    t.uuid('created_by');
    t.timestamps(true, true);
  });

  // The outbox: one row per event, written with the change; dispatched_at is set once its deliveries exist.
  await knex.schema.createTable('webhook_events', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.text('type').notNullable();
    t.jsonb('data').notNullable();
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('dispatched_at', { useTz: true });
  });
  await knex.raw('CREATE INDEX webhook_events_undispatched_idx ON webhook_events (created_at) WHERE dispatched_at IS NULL');

  await knex.schema.createTable('webhook_deliveries', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('event_id').notNullable().references('webhook_events.id').onDelete('CASCADE');
    t.uuid('endpoint_id').notNullable().references('webhook_endpoints.id').onDelete('CASCADE');
    t.text('status').notNullable().defaultTo('pending'); // pending | succeeded | failed
    t.integer('attempts').notNullable().defaultTo(0); // attempts made so far
    // When the next attempt is due; while one runs, a lease after which a sweep assumes it was lost.
    t.timestamp('next_attempt_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamps(true, true);
    t.index(['endpoint_id', 'created_at']);
  });
  await knex.raw("CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at) WHERE status = 'pending'");

  await knex.schema.createTable('webhook_delivery_attempts', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('delivery_id').notNullable().references('webhook_deliveries.id').onDelete('CASCADE');
    t.uuid('endpoint_id').notNullable().references('webhook_endpoints.id').onDelete('CASCADE');
    t.uuid('event_id').notNullable().references('webhook_events.id').onDelete('CASCADE');
    t.integer('attempt').notNullable();
    t.text('status').notNullable().defaultTo('pending'); // pending | succeeded | failed
    t.integer('response_status');
    // Why an attempt failed without an HTTP answer (timeout, refused address, ...); never a body.
    t.text('error');
    t.integer('duration_ms');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.index(['endpoint_id', 'created_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  for (const table of ['webhook_delivery_attempts', 'webhook_deliveries', 'webhook_events', 'webhook_endpoints']) {
    await knex.schema.dropTableIfExists(table);
  }
}
