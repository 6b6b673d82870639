/**
 * Change-log pruning and snapshots of the search replicas (docs/vector-index.md).
 *
 * - `search_state` (one row): `log_id` names this change log's lineage, so a snapshot taken from another
 *   database (or before a reset) is never loaded; `pruned_through` is the highest seq removed by pruning
 *   (a replica whose position is below it has missed changes and must rebuild).
 * - `search_replicas`: each running replica's position (`applied_seq`) and the seq of the newest
 *   snapshot it can restart from; pruning keeps every change any fresh replica may still need.
 */
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('search_state', (t) => {
    t.integer('id').primary().checkIn(['1']);
    t.uuid('log_id').notNullable().defaultTo(knex.raw('gen_random_uuid()'));
    t.bigInteger('pruned_through').notNullable().defaultTo(0);
  });
  await knex('search_state').insert({ id: 1 });
  await knex.schema.createTable('search_replicas', (t) => {
    t.text('replica_id').primary();
    t.bigInteger('applied_seq').notNullable();
    t.bigInteger('snapshot_seq');
    t.timestamp('updated_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('search_replicas');
  await knex.schema.dropTableIfExists('search_state');
}
