/**
 * The key ring's one sealed format (platform/keys/README.md): face templates sealed by earlier
 * versions (ring blob v1, first byte 0x01) are marked `key_id = 'v1:<kid>'`, so that the rotation
 * (`npm run rotate-biometric-key`), which re-seals every row whose key_id is not the active key, finds
 * them by the index and re-seals them in the current format. Until then they are read as they are.
 * Pure SQL: no key is needed, nothing is decrypted.
 *
 * Down takes the mark off the rows not yet re-sealed; rows already re-sealed stay in the current
 * format, which earlier versions cannot open (roll back before re-sealing, or restore a backup).
 */
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.raw("UPDATE canonical_embeddings SET key_id = 'v1:' || key_id WHERE get_byte(embedding, 0) = 1 AND key_id NOT LIKE 'v1:%'");
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw("UPDATE canonical_embeddings SET key_id = substr(key_id, 4) WHERE key_id LIKE 'v1:%'");
}
