/**
 * Every family of values stored sealed under the key ring, declared by the wing that owns it, so that a
 * key rotation re-seals all of them (`npm run rotate-biometric-key`, scripts/rotate-biometric-key.ts)
 * and an old key can be dropped only when no family holds a value under it. A wing declares its
 * families in its manifest (`sealedFamilies`, platform/wing.ts), declared here when processes/wings.ts
 * composes the wings; `resealAll` runs them in turn.
 *
 * Values that live for minutes in Redis (face-path hand-offs, the identity wing's sealed values) or
 * are rewritten on their own (search snapshots) are no family: they are gone long before an old key
 * is dropped, as docs/data-protection.md says.
 */
import type { Knex } from 'knex';
import { KeyRing, type KeyPurpose } from './key-ring.js';

/** What a re-seal pass did to one family, and what it left by ring key (a key no family names can go). */
export interface FamilyReport {
  family: string;
  resealed: number;
  /** Values per ring key after the pass (`v1:<kid>`: an older layout under that key; `legacy`: sealed without the ring). */
  byKey: Record<string, number>;
}

export interface SealedFamily {
  /** Shown in the rotation's report: what the values are (`face templates`, `webhook secrets`, ...). */
  name: string;
  purpose: KeyPurpose;
  /** Where its values are stored (table and column as the repositories name them): every sealed column belongs to a family. */
  stores: ReadonlyArray<{ table: string; column: string }>;
  /** Re-seals, in short batches, every value under another key than the active one or in an older layout. */
  reseal(db: Knex, ring: KeyRing, opts: { batchSize: number }): Promise<{ resealed: number; byKey: Record<string, number> }>;
}

const declared = new Map<string, SealedFamily>();

/** Declares a family (once per name: a wing's module may be loaded by several entry points). */
export function declareSealedFamily(family: SealedFamily): void {
  declared.set(family.name, family);
}

/** The families declared so far, in declaration order. */
export function sealedFamilies(): SealedFamily[] {
  return [...declared.values()];
}

/** Runs every declared family's re-seal pass; `onFamily` hears each report as it lands. */
export async function resealAll(
  db: Knex,
  ring: KeyRing,
  opts: { batchSize?: number; onFamily?: (report: FamilyReport) => void } = {},
): Promise<FamilyReport[]> {
  const reports: FamilyReport[] = [];
  for (const family of sealedFamilies()) {
    const { resealed, byKey } = await family.reseal(db, ring, { batchSize: opts.batchSize ?? 500 });
    const report = { family: family.name, resealed, byKey };
    reports.push(report);
    opts.onFamily?.(report);
  }
  return reports;
}

/** The ring key a stored value names, as reports count it. */
export function keyLabel(ring: KeyRing, sealed: Buffer | string): string {
  const kid = KeyRing.keyIdOf(sealed);
  if (kid === 'legacy') return kid;
  return ring.needsRotation(sealed) && kid === ring.activeKeyId ? `v1:${kid}` : kid;
}

/**
 * A family of sealed columns in one table, keyed by `idColumn` (camelCase, as the repositories name
 * them). Each column's values are bound to the subject `subjectOf(row)`. Rows are walked in id order
 * in batches; a value is re-sealed only if it is still the one read (a concurrent writer wins), so the
 * service keeps running. For tables of modest size (the walk reads every row once).
 */
export function sealedColumnsFamily(spec: {
  name: string;
  purpose: KeyPurpose;
  table: string;
  idColumn: string;
  columns: readonly string[];
  /** Text columns hold `sealText` values; binary columns hold blobs. */
  text: boolean;
  subjectOf: (row: Record<string, unknown>) => string;
}): SealedFamily {
  return {
    name: spec.name,
    purpose: spec.purpose,
    stores: spec.columns.map((column) => ({ table: spec.table, column })),
    async reseal(db, ring, { batchSize }) {
      let resealed = 0;
      const byKey: Record<string, number> = {};
      let after: unknown = null;
      for (;;) {
        const q = db(spec.table)
          .select(spec.idColumn, ...spec.columns)
          .orderBy(spec.idColumn)
          .limit(batchSize);
        if (after !== null) q.where(spec.idColumn, '>', after as string);
        const rows = (await q) as Record<string, unknown>[];
        if (rows.length === 0) break;
        for (const row of rows) {
          for (const column of spec.columns) {
            let value = row[column] as Buffer | string | null | undefined;
            if (value == null) continue;
            if (ring.needsRotation(value)) {
              const subject = spec.subjectOf(row);
              const next = spec.text
                ? ring.sealText(spec.purpose, ring.openText(spec.purpose, value as string, subject), subject)
                : ring.seal(spec.purpose, ring.open(spec.purpose, value as Buffer, subject), subject);
              const changed = await db(spec.table)
                .where({ [spec.idColumn]: row[spec.idColumn], [column]: value })
                .update({ [column]: next });
              if (changed > 0) {
                resealed++;
                value = next;
              }
            }
            const label = keyLabel(ring, value);
            byKey[label] = (byKey[label] ?? 0) + 1;
          }
        }
        after = rows.at(-1)![spec.idColumn];
      }
      return { resealed, byKey };
    },
  };
}
