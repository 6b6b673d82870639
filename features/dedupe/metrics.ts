/** The dedupe wing's metrics, declared here and created on each process's registry (platform/metrics.ts). */
import { counterSpec } from '../../platform/metrics.js';

export const DEDUPE_METRICS = {
  casesOpened: counterSpec({
    name: 'dedupe_cases_opened_total',
    help: 'Duplicate-identity cases opened at link, by kind: duplicate, possible_duplicate, watchlist',
    labelNames: ['kind'],
    zero: [{ kind: 'duplicate' }, { kind: 'possible_duplicate' }, { kind: 'watchlist' }],
  }),
  decisions: counterSpec({
    name: 'dedupe_case_decisions_total',
    help: 'Duplicate-identity cases decided by an administrator, by decision: confirmed, dismissed',
    labelNames: ['status'],
    zero: [{ status: 'confirmed' }, { status: 'dismissed' }],
  }),
};
