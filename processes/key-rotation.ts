/**
 * A key rotation of the whole ring (`npm run rotate-biometric-key`, docs/data-protection.md): every
 * sealed family the wings declare (platform/keys/sealed-families.ts) re-sealed under the active key,
 * each family's count reported and the run audited (`biometric.key_rotated`). The wings declare their
 * families in their manifests, composed by processes/wings.ts; test/sealed-families.test.ts checks that
 * every sealed column of the schema belongs to one.
 */
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import type { KeyRing } from '../platform/keys/key-ring.js';
import { resealAll, type FamilyReport } from '../platform/keys/sealed-families.js';
import { AuditEventsRepository } from '../platform/events/audit.js';
import './wings.js';

export interface KeyRotationResult {
  activeKeyId: string;
  families: FamilyReport[];
  /** Ring keys still named by some stored value other than the active one: while one is listed, it must stay in the ring. */
  keysStillInUse: string[];
}

export async function rotateKeyRing(
  db: Knex,
  ring: KeyRing,
  opts: { batchSize?: number; onFamily?: (report: FamilyReport) => void } = {},
): Promise<KeyRotationResult> {
  const families = await resealAll(db, ring, opts);
  const keysStillInUse = [...new Set(families.flatMap((f) => Object.keys(f.byKey)))].filter((k) => k !== ring.activeKeyId).sort();
  const rotated = families.reduce((n, f) => n + f.resealed, 0);
  await new AuditEventsRepository(db).record({
    type: 'biometric.key_rotated',
    actorType: 'system',
    actorId: null,
    subjectType: 'key_rotation',
    subjectId: randomUUID(), // the run's id: a rotation has no other subject
    data: {
      activeKeyId: ring.activeKeyId,
      rotated,
      templatesByKey: families.find((f) => f.family === 'face templates')?.byKey ?? {},
      families: Object.fromEntries(families.map((f) => [f.family, { resealed: f.resealed, byKey: f.byKey }])),
    },
  });
  return { activeKeyId: ring.activeKeyId, families, keysStillInUse };
}
