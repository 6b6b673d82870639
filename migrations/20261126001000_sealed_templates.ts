/**
 * Face templates at rest (docs/data-protection.md): every canonical embedding, until now 512 float32 in
 * clear, becomes a key-ring blob (AES-256-GCM under the active BIOMETRIC_KEYS key, the user id as
 * associated data), and `key_id` names the key that sealed it so that a rotation finds what is left.
 *
 * Rows are converted in batches by user id. Down decrypts them back (it needs the keys that sealed them).
 */
import type { Knex } from 'knex';
import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto';

// A frozen copy of what this migration used when it was written (a migration imports no application
// code: the application moves on, the migration must do what it did then). The ring as it was then:
// BIOMETRIC_KEYS / BIOMETRIC_ACTIVE_KEY_ID, the ring blob v1 laid out
// `0x01 | kid length | kid | iv 12 | tag 16 | ciphertext` under the ring key itself, the user id as
// associated data. Today's code reads that layout and `npm run rotate-biometric-key` re-seals it.
const EMBEDDING_BYTES = 512 * 4;

interface FrozenRing {
  activeKeyId: string;
  encrypt(plaintext: Buffer, associatedData: string): Buffer;
  decrypt(blob: Buffer, associatedData: string): Buffer;
}

function frozenRing(): FrozenRing {
  const keys = new Map<string, Buffer>();
  for (const part of (process.env.BIOMETRIC_KEYS ?? '')
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)) {
    const at = part.indexOf(':');
    const key = Buffer.from(part.slice(at + 1), 'base64');
    if (at < 1 || key.length !== 32) throw new Error(`BIOMETRIC_KEYS: "${part.slice(0, Math.max(at, 1))}" is not kid:base64(32 bytes)`);
    keys.set(part.slice(0, at), key);
  }
  const development = keys.size === 0;
  if (development) keys.set('dev', createHash('sha256').update('faceid development biometric key: never in production').digest());
  const activeKeyId = (development ? 'dev' : process.env.BIOMETRIC_ACTIVE_KEY_ID) || [...keys.keys()].at(-1)!;
  if (!keys.has(activeKeyId)) throw new Error(`BIOMETRIC_ACTIVE_KEY_ID ${activeKeyId} is not in BIOMETRIC_KEYS`);
  return {
    activeKeyId,
    encrypt(plaintext, associatedData) {
      const kid = Buffer.from(activeKeyId, 'utf8');
      const iv = randomBytes(12);
      const cipher = createCipheriv('aes-256-gcm', keys.get(activeKeyId)!, iv);
      cipher.setAAD(Buffer.from(associatedData, 'utf8'));
      const data = Buffer.concat([cipher.update(plaintext), cipher.final()]);
      return Buffer.concat([Buffer.from([1, kid.length]), kid, iv, cipher.getAuthTag(), data]);
    },
    decrypt(blob, associatedData) {
      if (blob[0] !== 1) throw new Error('not a ring blob v1');
      const at = 2 + blob[1]!;
      const kid = blob.subarray(2, at).toString('utf8');
      const key = keys.get(kid);
      if (!key) throw new Error(`no key ${kid} in the ring`);
      const decipher = createDecipheriv('aes-256-gcm', key, blob.subarray(at, at + 12));
      decipher.setAAD(Buffer.from(associatedData, 'utf8'));
      decipher.setAuthTag(blob.subarray(at + 12, at + 28));
      return Buffer.concat([decipher.update(blob.subarray(at + 28)), decipher.final()]);
    },
  };
}

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
  const ring = frozenRing();
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
  const ring = frozenRing();
  await convert(
    knex,
    () => undefined,
    (userId, blob) => ({ embedding: ring.decrypt(blob, userId), key_id: null }),
  );
  await knex.schema.alterTable('canonical_embeddings', (t) => {
    t.dropColumn('key_id');
  });
}
