/**
 * One name per fact (platform/events/map.ts) and the security events' origin (SPEC 13.3).
 *
 * - Stored AuditEvent rows written under a former name take the fact's one name, so that a filter by
 *   type finds old and new rows alike. The table below is this migration's own copy (migrations import
 *   no application code; the map documents the same renames in FORMER_EVENT_NAMES).
 * - audit_events.ip and user_agent: the client's address and user agent of the request that recorded
 *   the event (null for events of workers, scripts and timers, and for rows older than this migration).
 *   Text, not inet: the address is what the HTTP layer saw, kept as it was.
 */
import type { Knex } from 'knex';

const RENAMED: [from: string, to: string][] = [
  ['search_escalated', 'identify.escalated'],
  ['dedupe.case_opened', 'dedupe.case.opened'],
  ['dedupe.case_decided', 'dedupe.case.decided'],
  ['dispute.status_changed', 'dispute.updated'],
  ['profile.deleted', 'user.deleted'],
  ['profile.bank_account_confirmed', 'user.bank_account.updated'],
];

export async function up(knex: Knex): Promise<void> {
  await knex.schema.alterTable('audit_events', (t) => {
    t.text('ip');
    t.text('user_agent');
  });
  for (const [from, to] of RENAMED) await knex('audit_events').where({ type: from }).update({ type: to });
  await knex.raw(
    `UPDATE audit_events SET type = CASE WHEN data->>'to' = 'deactivated' THEN 'operator.deactivated' ELSE 'operator.reactivated' END
      WHERE type = 'operator.status_changed'`,
  );
}

export async function down(knex: Knex): Promise<void> {
  await knex.raw(`UPDATE audit_events SET type = 'operator.status_changed' WHERE type IN ('operator.deactivated', 'operator.reactivated')`);
  for (const [from, to] of RENAMED) await knex('audit_events').where({ type: to }).update({ type: from });
  await knex.schema.alterTable('audit_events', (t) => {
    t.dropColumn('ip');
    t.dropColumn('user_agent');
  });
}
