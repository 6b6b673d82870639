/**
 * The upstream worker's SQL, together in one place: landing a confirmed bankAccount change with its
 * audit row, and finding the pending changes the repair sweep checks.
 */
import type { Knex } from 'knex';
import type { UpstreamResult } from '../../shared/jobs/upstream.js';

/** Applies a pending bankAccount change if it is still the one this job was enqueued for. */
export async function confirmBankAccount(db: Knex, job: { userId: string; requestedAt: string }): Promise<UpstreamResult> {
  return db.transaction(async (trx) => {
    const updated = await trx('users')
      .where({ id: job.userId, pendingBankAccountRequestedAt: new Date(job.requestedAt) })
      .whereNotNull('pendingBankAccount')
      .whereNull('deletedAt')
      .update({
        bankAccount: trx.ref('pendingBankAccount'),
        pendingBankAccount: null,
        pendingBankAccountRequestedAt: null,
        updatedAt: trx.fn.now(),
      })
      .returning(['id']);
    if (updated.length === 0) return { applied: false };
    await trx('auditEvents').insert({
      type: 'profile.bank_account_confirmed',
      severity: 'info',
      actorType: 'system',
      actorId: null,
      subjectType: 'user',
      subjectId: job.userId,
      data: JSON.stringify({ requestedAt: job.requestedAt }),
    });
    return { applied: true };
  });
}

/** The oldest pending bankAccount changes of live users (at most `limit`), for the repair sweep. */
export async function pendingBankAccountChanges(db: Knex, limit: number): Promise<{ userId: string; requestedAt: Date }[]> {
  const rows: { id: string; pendingBankAccountRequestedAt: Date }[] = await db('users')
    .whereNotNull('pendingBankAccount')
    .whereNotNull('pendingBankAccountRequestedAt')
    .whereNull('deletedAt')
    .orderBy('pendingBankAccountRequestedAt')
    .limit(limit)
    .select('id', 'pendingBankAccountRequestedAt');
  return rows.map((r) => ({ userId: r.id, requestedAt: new Date(r.pendingBankAccountRequestedAt) }));
}
