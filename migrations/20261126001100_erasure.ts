/**
 * Erasure (docs/data-protection.md, "What an erasure touches"):
 * - a deleted user's row keeps no phone (nor name, date of birth, gender, bank account: already nullable);
 * - link rows keep `number_hash`, the keyed hash of their NIN/BVN (as platform/keys/number-hash.ts computes it), on
 *   every row the service writes, so that an erased row (number and registry record gone) is still
 *   recognised, and the rule "a number belongs to one account" holds on the hash too (unique);
 * - `erasures`: one row per erased user, the steps done, and when every copy was gone (the receipt).
 */
import type { Knex } from 'knex';
import { createHash, createHmac } from 'node:crypto';

// A frozen copy of the keyed hash as it was when this migration was written (a migration imports no
// application code): HMAC-SHA256 of `registry:number` under LINK_NUMBER_HASH_KEY (base64), or the
// development key when that is unset. The application must keep hashing exactly so (never rotated).
function frozenNumberHasher(): { hash(registry: 'nin' | 'bvn', number: string): string } {
  const setting = process.env.LINK_NUMBER_HASH_KEY ?? '';
  const key = setting ? Buffer.from(setting, 'base64') : createHash('sha256').update('faceid development link-number hash key: never in production').digest();
  return { hash: (registry, number) => createHmac('sha256', key).update(`${registry}:${number}`).digest('hex') };
}

export async function up(knex: Knex): Promise<void> {
  const hasher = frozenNumberHasher();
  await knex.raw('ALTER TABLE users ALTER COLUMN phone DROP NOT NULL');
  for (const registry of ['nin', 'bvn'] as const) {
    const table = `${registry}_links`;
    await knex.schema.alterTable(table, (t) => {
      t.text('number_hash');
    });
    const rows = (await knex(table).select('id', registry)) as { id: string; [k: string]: string }[];
    for (const r of rows)
      await knex(table)
        .where({ id: r.id })
        .update({ number_hash: hasher.hash(registry, r[registry]!) });
    await knex.raw(`ALTER TABLE ${table} ALTER COLUMN ${registry} DROP NOT NULL, ALTER COLUMN registry_record DROP NOT NULL`);
    await knex.raw(`CREATE UNIQUE INDEX ${table}_number_hash_uq ON ${table} (number_hash)`);
  }
  await knex.schema.createTable('erasures', (t) => {
    t.uuid('user_id').primary();
    t.timestamp('requested_at', { useTz: true }).notNullable().defaultTo(knex.fn.now());
    // The change-log seq of the embedding's removal: a search snapshot at or after it no longer holds the vector.
    t.bigInteger('delete_seq').notNullable();
    t.timestamp('redis_purged_at', { useTz: true });
    t.timestamp('completed_at', { useTz: true });
    t.index(['completed_at']);
  });
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.dropTable('erasures');
  for (const registry of ['nin', 'bvn'] as const) {
    const table = `${registry}_links`;
    // Erased rows cannot get their number back: they go.
    await knex(table).whereNull(registry).del();
    await knex.raw(`UPDATE ${table} SET registry_record = '{}'::jsonb WHERE registry_record IS NULL`);
    await knex.raw(`ALTER TABLE ${table} ALTER COLUMN ${registry} SET NOT NULL, ALTER COLUMN registry_record SET NOT NULL`);
    await knex.schema.alterTable(table, (t) => {
      t.dropColumn('number_hash');
    });
  }
  await knex.raw(`UPDATE users SET phone = 'erased:' || id::text WHERE phone IS NULL`);
  await knex.raw('ALTER TABLE users ALTER COLUMN phone SET NOT NULL');
}
