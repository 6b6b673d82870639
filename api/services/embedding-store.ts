/**
 * The ONLY write path of canonical embeddings (SPEC 6, docs/vector-index.md).
 *
 * Every write changes the row in `canonical_embeddings` AND appends to the change log
 * `embedding_changes` in one transaction, after taking a transaction-scoped advisory lock. The lock
 * makes change sequences commit in sequence order: a search replica that has seen seq N can never
 * later receive a smaller seq that committed late, so "applied up to N" is a safe cursor, and a
 * search that carries `minSeq` = the largest committed seq sees every write that answered before it.
 *
 * Called inside a caller's transaction (`trx`), the lock is held until that transaction ends: do the
 * embedding write last, and keep the rest of that transaction short.
 */
import type { Knex } from 'knex';
import { encodeEmbedding } from '../../shared/embeddings.js';

export type CanonicalSource = 'link_nin' | 'link_bvn' | 'verify_self';

/** Key of the advisory lock that serialises change-log appends (pg_advisory_xact_lock(int4, int4)). */
export const EMBEDDING_CHANGES_LOCK = [0x66616365 /* 'face' */, 6 /* SPEC section 6 */] as const;

async function inTransaction<T>(db: Knex, trx: Knex.Transaction | undefined, fn: (trx: Knex.Transaction) => Promise<T>): Promise<T> {
  return trx ? fn(trx) : db.transaction(fn);
}

async function appendChange(trx: Knex.Transaction, userId: string, op: 'upsert' | 'delete'): Promise<string> {
  const [row] = await trx('embeddingChanges').insert({ userId, op }).returning('seq');
  return String((row as { seq: string | number }).seq);
}

async function lockChanges(trx: Knex.Transaction): Promise<void> {
  await trx.raw('SELECT pg_advisory_xact_lock(?, ?)', [...EMBEDDING_CHANGES_LOCK]);
}

/**
 * Sets the user's canonical embedding (512 finite numbers, stored as given in float32 LE) and logs
 * the change. Returns the change sequence. `qualityScore`: the capture quality (0..100) of the capture
 * it came from, null when unknown (the /verify/self refresh rule compares against it).
 */
export async function upsertCanonical(
  db: Knex,
  userId: string,
  embedding: ArrayLike<number>,
  source: CanonicalSource,
  engineVersion: string,
  trx?: Knex.Transaction,
  qualityScore: number | null = null,
): Promise<{ seq: string }> {
  const bytes = encodeEmbedding(embedding); // validates before any lock is taken
  return inTransaction(db, trx, async (t) => {
    await lockChanges(t);
    await t('canonicalEmbeddings')
      .insert({ userId, embedding: bytes, source, engineVersion, qualityScore, updatedAt: t.fn.now() })
      .onConflict('userId')
      .merge(['embedding', 'source', 'engineVersion', 'qualityScore', 'updatedAt']);
    return { seq: await appendChange(t, userId, 'upsert') };
  });
}

/**
 * Removes the user's canonical embedding and logs the removal (also when there was none, so that a
 * replica holding a stale copy drops it). Once this returns, no search on any replica returns the user.
 */
export async function removeCanonical(db: Knex, userId: string, trx?: Knex.Transaction): Promise<{ seq: string; removed: boolean }> {
  return inTransaction(db, trx, async (t) => {
    await lockChanges(t);
    const removed = await t('canonicalEmbeddings').where({ userId }).del();
    return { seq: await appendChange(t, userId, 'delete'), removed: removed > 0 };
  });
}

/**
 * The largest committed change sequence ('0' before the first write): what a search must have applied
 * to see every write that has answered so far. Reads the primary key's last entry (an index-only probe).
 */
export async function currentChangeSeq(db: Knex): Promise<string> {
  const row = await db('embeddingChanges').max({ seq: 'seq' }).first();
  return row?.seq == null ? '0' : String(row.seq);
}
