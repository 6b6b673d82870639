/**
 * Face templates at rest (docs/data-protection.md): every canonical embedding, until now 512 float32 in
 * clear, becomes a key-ring blob (AES-256-GCM under the active BIOMETRIC_KEYS key, the user id as
 * associated data), and `key_id` names the key that sealed it so that a rotation finds what is left.
 *
 * Rows are converted in batches by user id. Down decrypts them back (it needs the keys that sealed them).
 */
import type { Knex } from 'knex';
import { EMBEDDING_BYTES } from '../platform/face/embeddings.js';
import { BiometricKeyRing } from '../platform/keys/key-ring.js';
import { processKeyRing } from '../platform/keys/templates.js';

const BATCH = 1000;

async function convert(
  knex: Knex,
  where: (q: Knex.QueryBuilder) => void,
  change: (userId: string, bytes: Buffer) => { embedding: Buffer; key_id: string | null },
): Promise<void> {
  let after = '';
  for (;;) {
    const q = knex('canonical_embeddings').select('user_id', 'embedding').orderBy('user_id').limit(BATCH);
    where(q);
    if (after) q.where('user_id', '>', after);
    const rows = (await q) as { user_id: string; embedding: Buffer }[];
    if (rows.length === 0) return;
    for (const r of rows) await knex('canonical_embeddings').where({ user_id: r.user_id }).update(change(r.user_id, r.embedding));
    after = rows[rows.length - 1]!.user_id;
  }
}

export async function up(knex: Knex): Promise<void> {
  const ring = processKeyRing();
  await knex.schema.alterTable('canonical_embeddings', (t) => {
    t.text('key_id');
  });
  await convert(
    knex,
    (q) => q.whereNull('key_id'),
    (userId, bytes) => {
      if (bytes.length !== EMBEDDING_BYTES) throw new Error(`canonical embedding of ${userId} has ${bytes.length} bytes: not a clear template`);
      return { embedding: ring.encrypt(bytes, userId), key_id: ring.activeKeyId };
    },
  );
  await knex.raw('ALTER TABLE canonical_embeddings ALTER COLUMN key_id SET NOT NULL');
  await knex.raw('CREATE INDEX canonical_embeddings_key_id_idx ON canonical_embeddings (key_id)');
}

export async function down(knex: Knex): Promise<void> {
  const ring: BiometricKeyRing = processKeyRing();
  await convert(
    knex,
    () => undefined,
    (userId, blob) => ({ embedding: ring.decrypt(blob, userId), key_id: null }),
  );
  await knex.schema.alterTable('canonical_embeddings', (t) => {
    t.dropColumn('key_id');
  });
}
