/**
 * What this wing keeps sealed under the key ring (platform/keys/sealed-families.ts): the canonical face
 * templates. Re-sealed batch by batch by `key_id` (indexed: the table holds every enrolled user), the
 * way `npm run rotate-biometric-key` runs every declared family.
 */
import type { Knex } from 'knex';
import type { KeyRing } from '../../platform/keys/key-ring.js';
import type { SealedFamily } from '../../platform/keys/sealed-families.js';
import { EmbeddingsRepository } from './embeddings-repository.js';

/** Re-seals every template not under the active key (or in an older layout); resumable. */
export async function rotateTemplates(
  db: Knex,
  ring: KeyRing,
  opts: { batchSize?: number; onBatch?: (rotatedSoFar: number) => void } = {},
): Promise<{ rotated: number; remainingByKey: Record<string, number> }> {
  const embeddings = new EmbeddingsRepository(db, ring);
  let rotated = 0;
  for (;;) {
    const { rotated: n } = await embeddings.rotateBatch(opts.batchSize ?? 500);
    if (n === 0) {
      // A batch may come back empty while a writer holds the last old rows (they get the active key anyway).
      const left = await embeddings.countByKey();
      if (Object.keys(left).every((k) => k === ring.activeKeyId)) break;
      await new Promise((r) => setTimeout(r, 100));
      continue;
    }
    rotated += n;
    opts.onBatch?.(rotated);
  }
  return { rotated, remainingByKey: await embeddings.countByKey() };
}

export const CANONICAL_TEMPLATES: SealedFamily = {
  name: 'face templates',
  purpose: 'templates',
  stores: [{ table: 'canonicalEmbeddings', column: 'embedding' }],
  async reseal(db, ring, { batchSize }) {
    const { rotated, remainingByKey } = await rotateTemplates(db, ring, { batchSize });
    return { resealed: rotated, byKey: remainingByKey };
  },
};
