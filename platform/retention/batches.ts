import type { Knex } from 'knex';
import type { Db } from '../database/unit-of-work.js';

/** Rows one DELETE of a purge removes: a first run on a large table holds no lock for minutes. */
export const PURGE_BATCH = 5000;

/**
 * Runs `sql` (a `DELETE ... WHERE id IN (SELECT id ... LIMIT ?)`, the limit its last binding) until a
 * batch deletes fewer than PURGE_BATCH rows; returns the total.
 */
export async function deleteInBatches(db: Db, sql: string, bindings: Knex.RawBinding[]): Promise<number> {
  let total = 0;
  for (;;) {
    const r = await db.raw(sql, [...bindings, PURGE_BATCH]);
    const n = (r as { rowCount?: number }).rowCount ?? 0;
    total += n;
    if (n < PURGE_BATCH) return total;
  }
}
