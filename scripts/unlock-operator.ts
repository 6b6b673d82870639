/**
 * `npm run unlock-operator -- <identifier>`: the documented way back for a locked account when no
 * administrator can sign in (e.g. the last administrator was locked by someone guessing its password):
 * clears the lock and the failure count, audited (`operator.unlocked`, via cli). The password is not
 * changed and the account's other state (flag, status, role) is left as it is. Needs the service's
 * configuration (DATABASE_URL), i.e. a shell on a machine of the deployment, no SQL or Redis surgery.
 * Exits 1 when no such operator exists, 2 on bad usage.
 */
import { config } from '../processes/config.js';
import { createDb } from '../platform/database/db.js';
import { AuditEventsRepository } from '../platform/events/audit.js';
import { OperatorsRepository } from '../features/sign-in/operators-repository.js';

const [identifier] = process.argv.slice(2);
if (!identifier || identifier.startsWith('-')) {
  console.error('usage: npm run unlock-operator -- <identifier>');
  process.exit(2);
}

const db = createDb(config().database.url, 1);
const operators = new OperatorsRepository(db);
try {
  const op = await operators.findByIdentifier(identifier);
  if (!op) {
    console.error(`error: no operator "${identifier}"`);
    process.exitCode = 1;
  } else {
    await db.transaction(async (trx) => {
      await operators.unlock(op.id, trx);
      await new AuditEventsRepository(db).record(
        {
          type: 'operator.unlocked',
          actorType: 'system',
          actorId: null,
          subjectType: 'operator',
          subjectId: op.id,
          data: { via: 'cli', wasLocked: op.isLockedNow() },
        },
        trx,
      );
    });
    console.log(
      op.isLockedNow()
        ? `${op.role} "${op.identifier}" unlocked (it had ${op.failedLoginCount} failed sign-ins).`
        : `${op.role} "${op.identifier}" was not locked; failure count cleared.`,
    );
  }
} finally {
  await db.destroy();
}
