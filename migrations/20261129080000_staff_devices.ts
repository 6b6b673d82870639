/**
 * Staff devices (docs/security.md "Staff devices"): a browser or app where a member of staff signed in
 * before holds an opaque device token; only its keyed hash is stored here. A sign-in that presents it is
 * judged by the device's own failure count, so a stranger's wrong passwords (which count toward the
 * account's lock) never lock the account's known devices out.
 *
 * - locked_at NULL: usable until expires_at; set: the device had OPERATOR_MAX_FAILED_LOGINS failures
 *   in a row and is no longer recognised (its sign-ins count toward the account like any other).
 */
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.createTable('operator_devices', (t) => {
    t.uuid('id').primary().defaultTo(knex.raw('gen_random_uuid()'));
    t.uuid('operator_id').notNullable().references('id').inTable('operators').onDelete('CASCADE');
    t.string('token_hash', 64).notNullable().unique();
    t.integer('failed_count').notNullable().defaultTo(0);
    t.timestamp('locked_at', { useTz: true });
    t.timestamp('created_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('last_used_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    t.timestamp('expires_at', { useTz: true }).notNullable();
    t.index(['operator_id']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('operator_devices');
}
