/**
 * The data this wing keeps, declared to the retention registry (platform/retention/README.md): the
 * live capture (a face photo, sealed) a duplicate-identity case keeps for its review. It goes when the
 * case has been decided for DEDUPE_CAPTURE_RETENTION_DAYS, and with the erasure of the account that
 * gave it; the case itself (ids, score, decision) stays as the record of the decision.
 */
import type { Knex } from 'knex';
import type { DataFamily } from '../../platform/retention/registry.js';
import { DedupeRepository } from './repository.js';

export function dedupeDataFamilies(db: Knex, days: { captures: number }): DataFamily[] {
  const repo = new DedupeRepository(db);
  return [
    {
      name: 'dedupeCaptures',
      store: 'dedupe_cases.capture_sealed',
      retention: {
        days: days.captures,
        rule: 'decided_at older than DEDUPE_CAPTURE_RETENTION_DAYS (an open case keeps its capture); the case stays',
        purge: (cutoff) => repo.purgeCapturesDecidedBefore(cutoff),
      },
      erasure: {
        phase: 'transaction',
        removes: "the captures of every case opened at the user's links; the cases stay",
        erase: async (userId, trx) => {
          await repo.eraseCapturesOf(userId, trx);
        },
      },
    },
  ];
}
