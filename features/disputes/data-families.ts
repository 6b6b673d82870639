/**
 * The data this wing keeps, declared to the retention registry (platform/retention/README.md):
 * disputes, kept RETENTION_DAYS_DISPUTES after their last change once closed; an open or
 * investigating dispute is never purged. Registered before the search logs: a purged dispute frees
 * the log it held in the same run.
 */
import type { Knex } from 'knex';
import { deleteInBatches } from '../../platform/retention/batches.js';
import type { DataFamily } from '../../platform/retention/registry.js';

export function disputeDataFamilies(db: Knex, days: { disputes: number }): DataFamily[] {
  return [
    {
      name: 'disputes',
      store: 'disputes',
      retention: {
        days: days.disputes,
        rule: 'resolved or rejected, updated_at older than RETENTION_DAYS_DISPUTES; open and investigating ones are never purged',
        purge: (cutoff) =>
          deleteInBatches(
            db,
            `DELETE FROM disputes WHERE id IN (SELECT id FROM disputes WHERE status IN ('resolved', 'rejected') AND updated_at < ? LIMIT ?)`,
            [cutoff],
          ),
      },
      // Kept at erasure: the consumer's claim about a call, needed to answer it (its reason is free text they wrote).
    },
  ];
}
