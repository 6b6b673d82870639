/**
 * The AuditEvent family, the floor's own (platform/events/audit.ts). The application's least-privilege
 * role `faceid_app` may add and read audit rows but never change or delete them
 * (migrations/20261126080100_app_role.ts), so the sweep does not DELETE them itself: it calls
 * `purge_audit_events(keep_days, batch)`, a SECURITY DEFINER function owned by the owner role
 * (migrations/20261127090000_audit_events_purge.ts) that deletes only rows older than `keep_days`
 * measured by the database's own clock, and refuses to keep fewer than AUDIT_EVENTS_MIN_DAYS. A
 * compromised application can thus not rewrite the recent audit trail (docs/data-protection.md).
 */
import type { Db } from '../database/unit-of-work.js';
import type { DataFamily } from './registry.js';

/** The shortest audit retention the database function accepts (and RETENTION_DAYS_AUDIT_EVENTS allows). */
export const AUDIT_EVENTS_MIN_DAYS = 365;

const BATCH = 5000;

export function auditEventsFamily(db: Db, days: number): DataFamily {
  return {
    name: 'auditEvents',
    store: 'audit_events',
    retention: {
      days,
      rule: `created_at older than RETENTION_DAYS_AUDIT_EVENTS (at least ${AUDIT_EVENTS_MIN_DAYS}), deleted by the owner-role function purge_audit_events`,
      async purge() {
        let total = 0;
        for (;;) {
          const r = await db.raw('SELECT purge_audit_events(?::integer, ?::integer) AS n', [days, BATCH]);
          const n = Number((r.rows as { n: number }[])[0]?.n ?? 0);
          total += n;
          if (n < BATCH) return total;
        }
      },
    },
    // Kept at erasure: the log is the record of processing (actor and subject ids, masked values only).
  };
}
