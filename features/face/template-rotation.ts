/**
 * Key rotation of the face templates at rest: re-encrypt, batch by batch, every template sealed by
 * another key than the ring's active one. Used by `npm run rotate-biometric-key` and by tests.
 */
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { BiometricKeyRing } from '../../platform/keys/key-ring.js';
import { EmbeddingsRepository } from './embeddings-repository.js';
import { AuditEventsRepository } from '../../platform/events/audit.js';

export async function rotateTemplates(
  db: Knex,
  ring: BiometricKeyRing,
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
  const remainingByKey = await embeddings.countByKey();
  await new AuditEventsRepository(db).record({
    type: 'biometric.key_rotated',
    actorType: 'system',
    actorId: null,
    subjectType: 'key_rotation',
    subjectId: randomUUID(), // the run's id: a rotation has no other subject
    data: { activeKeyId: ring.activeKeyId, rotated, templatesByKey: remainingByKey },
  });
  return { rotated, remainingByKey };
}
