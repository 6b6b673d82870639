/**
 * Retention (docs/data-protection.md, "How long"): records older than their family's RETENTION_DAYS_*
 * are deleted by the retention job (a BullMQ repeatable job on the `upstream` queue), in batches, and
 * each run that purged something writes an AuditEvent `retention.purged` with the counts and the cut-offs.
 *
 * Families: search logs (by created_at; a log still referenced by a kept dispute stays with it),
 * disputes (resolved or rejected, by updated_at; open or investigating ones are never purged), audit
 * events (by created_at).
 */
import { randomUUID } from 'node:crypto';
import type { Knex } from 'knex';
import { AuditEventsRepository } from '../events/audit.js';
import { Repository } from '../database/unit-of-work.js';

export interface RetentionDays {
  searchLogs: number;
  disputes: number;
  auditEvents: number;
}

export interface PurgeCounts {
  searchLogs: number;
  disputes: number;
  auditEvents: number;
}

const BATCH = 5000;

export class RetentionRepository extends Repository {
  /** Deletes `sql` (a DELETE ... WHERE id IN (SELECT id ... LIMIT ?)) batch by batch; returns the total. */
  private async inBatches(sql: string, bindings: Knex.RawBinding[]): Promise<number> {
    let total = 0;
    for (;;) {
      const r = await this.db.raw(sql, [...bindings, BATCH]);
      const n = r.rowCount ?? 0;
      total += n;
      if (n < BATCH) return total;
    }
  }

  async purge(days: RetentionDays, now = new Date()): Promise<PurgeCounts> {
    const cutoff = (d: number) => new Date(now.getTime() - d * 86_400_000);
    const disputes = await this.inBatches(
      `DELETE FROM disputes WHERE id IN (SELECT id FROM disputes WHERE status IN ('resolved', 'rejected') AND updated_at < ? LIMIT ?)`,
      [cutoff(days.disputes)],
    );
    const searchLogs = await this.inBatches(
      `DELETE FROM search_logs WHERE id IN (
         SELECT s.id FROM search_logs s WHERE s.created_at < ? AND NOT EXISTS (SELECT 1 FROM disputes d WHERE d.search_log_id = s.id) LIMIT ?)`,
      [cutoff(days.searchLogs)],
    );
    const auditEvents = await this.inBatches(`DELETE FROM audit_events WHERE id IN (SELECT id FROM audit_events WHERE created_at < ? LIMIT ?)`, [
      cutoff(days.auditEvents),
    ]);
    const counts = { searchLogs, disputes, auditEvents };
    // A run that purged nothing leaves no row: the hourly no-op would otherwise fill the log it keeps short.
    if (searchLogs + disputes + auditEvents === 0) return counts;
    await new AuditEventsRepository(this.db).record({
      type: 'retention.purged',
      actorType: 'system',
      actorId: null,
      subjectType: 'retention_run',
      subjectId: randomUUID(),
      data: {
        counts,
        cutoffs: {
          searchLogs: cutoff(days.searchLogs).toISOString(),
          disputes: cutoff(days.disputes).toISOString(),
          auditEvents: cutoff(days.auditEvents).toISOString(),
        },
      },
    });
    return counts;
  }
}
