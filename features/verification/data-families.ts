/**
 * The data this wing keeps, declared to the retention registry (platform/retention/README.md): the
 * search logs (one row per /identify and /verify/self call, what billing and disputes refer to), kept
 * RETENTION_DAYS_SEARCH_LOGS; a log still referenced by a kept dispute stays with it.
 */
import type { Knex } from 'knex';
import { deleteInBatches } from '../../platform/retention/batches.js';
import type { DataFamily } from '../../platform/retention/registry.js';

export function verificationDataFamilies(db: Knex, days: { searchLogs: number }): DataFamily[] {
  return [
    {
      name: 'searchLogs',
      store: 'search_logs',
      retention: {
        days: days.searchLogs,
        rule: 'created_at older than RETENTION_DAYS_SEARCH_LOGS, unless a kept dispute refers to it',
        purge: (cutoff) =>
          deleteInBatches(
            db,
            `DELETE FROM search_logs WHERE id IN (
               SELECT s.id FROM search_logs s WHERE s.created_at < ? AND NOT EXISTS (SELECT 1 FROM disputes d WHERE d.search_log_id = s.id) LIMIT ?)`,
            [cutoff],
          ),
      },
      // Kept at erasure (until their age rule): ids, outcomes and scores for billing and disputes, no face and no number.
    },
  ];
}
