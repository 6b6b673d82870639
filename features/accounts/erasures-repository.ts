/**
 * Erasures (docs/data-protection.md, "What an erasure touches, in order"): one row per erased user,
 * begun in the transaction of the DELETE, then each later copy's step marked as it is done:
 *   1. PostgreSQL (in the DELETE's transaction): personal columns cleared, link rows reduced to their
 *      keyed hash, the canonical embedding deleted and its removal appended to the change log;
 *   2. after the commit, every registered after-commit eraser (platform/retention/registry.ts: the
 *      user's Redis keys: capture, validations with their registry photo, link tokens, failure count);
 *   3. search snapshots on disk: every search replica that writes snapshots rewrites its snapshot past
 *      the removal and deletes the older ones, within ERASURE_MAX_SECONDS (it reports its snapshot seq);
 * and, once all are done, the AuditEvent `user.erased` (the receipt), written exactly once.
 */
import { AuditEventsRepository } from '../../platform/events/audit.js';
import { Repository, type Db, type Tx } from '../../platform/database/unit-of-work.js';
import type { ErasureLedger } from '../../platform/retention/registry.js';

/** A replica whose position is older than this no longer holds erasures back (it is gone). */
export const ERASURE_REPLICA_STALE_MS = 10 * 60_000;

/** The erasure ledger the retention sweep finishes erasures with (platform/retention/sweep.ts). */
export class ErasuresRepository extends Repository implements ErasureLedger {
  /** Step 1 is done in `trx`: the erasure is recorded with the seq of the embedding's removal. */
  async begin(userId: string, deleteSeq: string, trx: Tx): Promise<void> {
    await trx('erasures').insert({ userId, deleteSeq }).onConflict('userId').ignore();
  }

  /** Step 2 is done: every after-commit eraser succeeded. */
  async markAfterCommitDone(userId: string): Promise<void> {
    await this.db('erasures').where({ userId }).whereNull('redisPurgedAt').update({ redisPurgedAt: this.db.fn.now() });
  }

  /** Erasures whose step 2 has not been confirmed after `graceMs` (the DELETE's own attempt failed). */
  async awaitingAfterCommit(graceMs: number, limit = 500): Promise<string[]> {
    const rows = await this.db('erasures')
      .whereNull('redisPurgedAt')
      .where('requestedAt', '<', new Date(Date.now() - graceMs))
      .orderBy('requestedAt')
      .limit(limit)
      .select('userId');
    return rows.map((r: { userId: string }) => r.userId);
  }

  /**
   * The smallest removal seq still to be covered by a snapshot above `snapshotSeq` (a replica whose
   * snapshot is older must rewrite it), or null.
   */
  async oldestPendingAfter(snapshotSeq: bigint, trx?: Db): Promise<bigint | null> {
    const row = await this.on(trx)('erasures').whereNull('completedAt').where('deleteSeq', '>', String(snapshotSeq)).min({ seq: 'deleteSeq' }).first();
    return row?.seq == null ? null : BigInt(row.seq);
  }

  /**
   * The smallest removal seq of any erasure, receipted or not, above `snapshotSeq`, or null. A replica
   * stopped during an erasure is not counted by the receipt; its snapshot older than the removal may
   * still hold the erased vector, so it must be rewritten when the replica starts again.
   */
  async oldestAfter(snapshotSeq: bigint, trx?: Db): Promise<bigint | null> {
    const row = await this.on(trx)('erasures').where('deleteSeq', '>', String(snapshotSeq)).min({ seq: 'deleteSeq' }).first();
    return row?.seq == null ? null : BigInt(row.seq);
  }

  /**
   * Completes every erasure whose copies are all gone: Redis purged, and no fresh replica holds a
   * snapshot older than its removal. Writes `user.erased` once per erasure; returns the user ids.
   */
  async completeCovered(): Promise<string[]> {
    return this.db.transaction(async (trx) => {
      const done = (
        await trx.raw(
          `UPDATE erasures e SET completed_at = now()
          WHERE e.completed_at IS NULL AND e.redis_purged_at IS NOT NULL
            AND NOT EXISTS (SELECT 1 FROM search_replicas r
                             WHERE r.snapshot_seq IS NOT NULL AND r.snapshot_seq < e.delete_seq
                               AND r.updated_at > now() - (? * interval '1 millisecond'))
          RETURNING e.user_id, e.requested_at, e.redis_purged_at, e.completed_at, e.delete_seq`,
          [ERASURE_REPLICA_STALE_MS],
        )
      ).rows as { user_id: string; requested_at: Date; redis_purged_at: Date; completed_at: Date; delete_seq: string }[];
      const audit = new AuditEventsRepository(this.db);
      for (const e of done) {
        await audit.record(
          {
            type: 'user.erased',
            actorType: 'system',
            actorId: null,
            subjectType: 'user',
            subjectId: e.user_id,
            data: {
              requestedAt: new Date(e.requested_at).toISOString(),
              steps: ['postgresql', 'redis', 'search_snapshots'],
              redisPurgedAt: new Date(e.redis_purged_at).toISOString(),
              completedAt: new Date(e.completed_at).toISOString(),
              embeddingRemovalSeq: e.delete_seq,
            },
          },
          trx,
        );
      }
      return done.map((e) => e.user_id);
    });
  }
}
