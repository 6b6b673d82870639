/** The accounts wing as the processes compose it (platform/wing.ts, processes/wings.ts). */
import { defineWing } from '../../platform/wing.js';
import { bankAccountContract } from './job.js';

export const accountsWing = defineWing({
  name: 'accounts',
  routes: () => import('./routes.js').then((m) => m.default),
  tables: ['preferences', 'erasures'],
  jobs: [bankAccountContract],
  workers: { background: () => import('./worker/worker.js').then((m) => m.startBankAccountWorker) },
  reads: [
    {
      table: 'search_replicas',
      reason: 'an erasure is complete once every search replica reports a snapshot past it: the replicas write their progress there, the erasure reads it',
    },
  ],
});
