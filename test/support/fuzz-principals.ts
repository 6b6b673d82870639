/**
 * The principals a fuzz run signs its requests with: one of every kind of token the service meets
 * (live consumer, operator, administrator; flagged, deactivated, deleted, logged out; expired; a
 * correctly signed token with odd claims), and ids that exist (users, operators, SearchLog entries,
 * disputes), as real rows and sessions in the harness's database.
 */
import { randomUUID } from 'node:crypto';
import { TokenService } from '../../features/sign-in/token-service.js';
import type { Harness } from '../helpers/harness.js';
import { newConsumer, newOperator } from '../helpers/principals.js';
import type { FuzzPrincipals } from './fuzzer.js';
import { identifyRow, insertLogs, verifySelfRow } from './search-logs.js';

export async function fuzzPrincipals(h: Harness): Promise<FuzzPrincipals> {
  const consumer = await newConsumer(h);
  const other = await newConsumer(h);
  const deleted = await newConsumer(h);
  await h.deps.db('users').where({ id: deleted.userId }).update({ deletedAt: new Date() });
  const loggedOut = await newConsumer(h);
  await h.deps.db('sessions').where({ id: loggedOut.sessionId }).update({ revokedAt: new Date() });
  const operator = await newOperator(h);
  const admin = await newOperator(h, { role: 'administrator' });
  const admin2 = await newOperator(h, { role: 'administrator' });
  const flagged = await newOperator(h, { mustResetPassword: true });
  const deactivated = await newOperator(h, { status: 'deactivated' });

  const [identifyRef, selfRef] = await insertLogs(h.deps.db, [
    identifyRow({ operatorId: operator.operatorId, candidates: [{ userId: consumer.userId, score: 0.8 }] }),
    verifySelfRow({ userId: consumer.userId }),
  ]);
  const [dispute] = await h.deps.db('disputes').insert({ searchLogId: selfRef, userId: consumer.userId, reason: 'fuzz', status: 'open' }).returning('id');

  const expiring = new TokenService({ security: { ...h.config.security, accessTokenTtlSeconds: -120 } });
  const expired = await expiring.signAccess({ sub: consumer.userId, aud: 'consumer', sid: consumer.sessionId });
  const odd = await Promise.all([
    h.deps.tokens.signAccess({ sub: 'not-a-uuid', aud: 'consumer', sid: consumer.sessionId }),
    h.deps.tokens.signAccess({ sub: admin.operatorId, aud: 'operator', sid: "x' or 1=1 --" }),
    h.deps.tokens.signAccess({ sub: randomUUID(), aud: 'operator', sid: randomUUID() }),
  ]);
  return {
    tokens: {
      consumer: [consumer.token, other.token],
      operator: [operator.token],
      administrator: [admin.token, admin2.token],
      flagged: [flagged.token],
      deactivated: [deactivated.token],
      deleted: [deleted.token],
      loggedOut: [loggedOut.token],
      expired: [expired.token],
      oddClaims: odd.map((o) => o.token),
    },
    ids: {
      users: [consumer.userId, other.userId, deleted.userId],
      operators: [operator.operatorId, flagged.operatorId, deactivated.operatorId],
      referenceIds: [identifyRef!, selfRef!],
      disputes: [String(dispute.id ?? dispute)],
    },
  };
}
