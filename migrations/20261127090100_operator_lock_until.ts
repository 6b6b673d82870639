/**
 * Staff lock windows (docs/security.md): `operators.locked_until` is when a temporary lock lapses.
 *
 * - locked_at NULL: not locked.
 * - locked_at set, locked_until NULL: locked until an administrator's reset-password or reset-mfa, or
 *   `npm run unlock-operator` (an operator's lock; an administrator after STAFF_MAX_FAILURES failures).
 * - locked_at set, locked_until set: an administrator's lock that lapses by itself at locked_until; the
 *   failure count is kept across the window, so the next lock is longer and the cap is reached.
 *
 * The lapse is compared in the database (`locked_until <= now()`), never against a time the application
 * read back (a JavaScript Date holds milliseconds, the column microseconds).
 */
import type { Knex } from 'knex';

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('operators', (t) => {
    t.timestamp('locked_until', { useTz: true });
  });
  // Administrators locked under the former rule lapsed 900 s after the lock: keep that window.
  await knex.raw(`UPDATE operators SET locked_until = locked_at + interval '900 seconds' WHERE role = 'administrator' AND locked_at IS NOT NULL`);
}

export async function down(knex: Knex): Promise<void> {
  await knex.schema.alterTable('operators', (t) => {
    t.dropColumn('locked_until');
  });
}
