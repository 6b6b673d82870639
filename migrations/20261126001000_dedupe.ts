/**
 * Duplicate identities (docs/dedupe.md): the cases a link opens when its face is already enrolled
 * under another account or is on the watch-list, and the watch-list itself.
 */
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('watchlist_entries', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.text('reason').notNullable();
    // The face's embedding (float32 LE), sealed by the biometric key ring with `watchlist:<id>` bound in.
    t.binary('embedding_sealed').notNullable();
    t.text('engine_version').notNullable();
    t.uuid('created_by');
    // The case whose capture was listed, when the entry came from a confirmed case.
    t.uuid('source_case_id');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
  });

  await knex.schema.createTable('dedupe_cases', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.text('kind').notNullable(); // duplicate | possible_duplicate | watchlist
    t.text('status').notNullable().defaultTo('open'); // open | confirmed | dismissed
    t.uuid('user_id').notNullable(); // the account that was linking
    t.uuid('matched_user_id'); // the account already enrolled with the face
    t.uuid('watchlist_entry_id').references('watchlist_entries.id').onDelete('SET NULL');
    t.double('score').notNullable();
    t.text('registry').notNullable(); // nin | bvn: what was being linked
    t.boolean('blocked').notNullable().defaultTo(false); // the link was refused (hard-block)
    // The new live capture (JPEG), sealed by the key ring with `dedupe-case:<id>` bound in; dropped
    // once the case is decided and DEDUPE_CAPTURE_RETENTION_DAYS have passed.
    t.binary('capture_sealed');
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('decided_at', { useTz: true });
    t.uuid('decided_by');
    t.text('note');
    t.index(['status', 'created_at']);
    t.index(['user_id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTableIfExists('dedupe_cases');
  await knex.schema.dropTableIfExists('watchlist_entries');
}
