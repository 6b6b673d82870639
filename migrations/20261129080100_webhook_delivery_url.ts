/**
 * Each webhook delivery records the endpoint URL it was fanned out to (docs/security.md, webhook replay):
 * a replay goes to an endpoint only while its URL is still that one, so changing an endpoint's URL and
 * then replaying the history cannot send old events somewhere new. Rows from before: the endpoint's
 * URL now (the best knowledge there is).
 */
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_deliveries', (t) => {
    t.text('endpoint_url');
  });
  await knex.raw(`UPDATE webhook_deliveries d SET endpoint_url = e.url FROM webhook_endpoints e WHERE e.id = d.endpoint_id`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('webhook_deliveries', (t) => {
    t.dropColumn('endpoint_url');
  });
}
