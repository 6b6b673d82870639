/** Recording a public event as the service does (its AuditEvent and its webhook outbox row), for the webhook tests. */
import type { Knex } from 'knex';
import { AuditEventsRepository } from '../../platform/events/audit.js';

/** Records `user.deleted` for `userId` (in `trx` when given) and returns the webhook event id. */
export async function recordUserDeleted(db: Knex, userId: string, trx?: Knex.Transaction): Promise<string> {
  const id = await new AuditEventsRepository(db).record(
    {
      type: 'user.deleted',
      actorType: 'system',
      actorId: null,
      subjectType: 'user',
      subjectId: userId,
      data: { embeddingRemoved: true, refreshTokensRevoked: 0 },
      public: { userId },
    },
    trx,
  );
  return id!;
}
