/**
 * What the confirmation worker (./worker.ts) does to the data, on the repositories: landing a confirmed bankAccount
 * change with its audit row (one transaction), and finding the pending changes the repair sweep checks.
 */
import type { Knex } from 'knex';
import type { BankAccountConfirmResult } from '../job.js';
import { AuditEventsRepository } from '../../../platform/events/audit.js';
import { UsersRepository } from '../../users/index.js';

/** Applies a pending bankAccount change if it is still the one this job was enqueued for. */
export async function confirmBankAccount(db: Knex, job: { userId: string; requestedAt: string }): Promise<BankAccountConfirmResult> {
  const users = new UsersRepository(db);
  return db.transaction(async (trx) => {
    const applied = await users.confirmPendingBankAccount(job.userId, new Date(job.requestedAt), trx);
    if (!applied) return { applied: false };
    await new AuditEventsRepository(db).record(
      {
        type: 'user.bank_account.updated',
        actorType: 'system',
        actorId: null,
        subjectType: 'user',
        subjectId: job.userId,
        data: { requestedAt: job.requestedAt },
        public: { userId: job.userId, status: 'applied' },
      },
      trx,
    );
    return { applied: true };
  });
}

/** The oldest pending bankAccount changes of live users (at most `limit`), for the repair sweep. */
export async function pendingBankAccountChanges(db: Knex, limit: number): Promise<{ userId: string; requestedAt: Date }[]> {
  const rows = await new UsersRepository(db).pendingBankAccounts(limit);
  return rows.map((r) => ({ userId: r.id, requestedAt: new Date(r.pendingBankAccountRequestedAt) }));
}
