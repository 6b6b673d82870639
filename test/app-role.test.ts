/**
 * The application's least-privilege role (migrations/20261126080100_app_role.ts): as `faceid_app` the
 * product's rows can be read and written, but no table can be created, dropped or truncated, the
 * migration bookkeeping is out of reach, and AuditEvent rows cannot be changed or deleted. Checked with
 * SET ROLE on a connection to a freshly migrated database (the role is NOLOGIN; a deployment's login
 * role is a member of it).
 */
import test from 'ava';
import { createTestDatabase } from './helpers/db.js';
import { createDb } from '../platform/database/db.js';
import { AuditEventsRepository } from '../platform/events/audit.js';

test('faceid_app: DML on the product tables, no DDL, no migration tables, audit events append-only', async (t) => {
  const tdb = await createTestDatabase();
  const owner = createDb(tdb.url, 2);
  try {
    const auditEvents = new AuditEventsRepository(owner);
    await auditEvents.record({ type: 'operator.mfa_enabled', actorType: 'system', actorId: null, subjectType: 'test', subjectId: 'x' });
    await owner.transaction(async (trx) => {
      await trx.raw('SET LOCAL ROLE faceid_app');
      const [user] = await trx('users').insert({ phone: '+2348039990000' }).returning('id');
      await trx('users').where({ id: user.id }).update({ name: 'Ada' });
      await trx('sessions').insert({ subjectType: 'consumer', subjectId: user.id });
      await auditEvents.record({ type: 'operator.mfa_enabled', actorType: 'system', actorId: null, subjectType: 'test', subjectId: 'y' }, trx);
      t.true(Number((await trx('audit_events').count({ n: '*' }).first())!.n) >= 2);
      await trx('sessions').where({ subjectId: user.id }).delete();
    });
    const refused = async (sql: string) => {
      const err = await t.throwsAsync(
        owner.transaction(async (trx) => {
          await trx.raw('SET LOCAL ROLE faceid_app');
          await trx.raw(sql);
        }),
      );
      t.regex(String(err?.message), /permission denied|must be owner/, sql);
    };
    await refused('CREATE TABLE evil (id int)');
    await refused('DROP TABLE users');
    await refused('TRUNCATE search_logs');
    await refused('ALTER TABLE users ADD COLUMN x int');
    await refused('SELECT * FROM knex_migrations');
    await refused("UPDATE audit_events SET type = 'rewritten'");
    await refused('DELETE FROM audit_events');
    t.is(Number((await owner('audit_events').where({ type: 'rewritten' }).count({ n: '*' }).first())!.n), 0);
  } finally {
    await owner.destroy();
    await tdb.drop();
  }
});
