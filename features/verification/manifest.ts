/** The verification wing as the processes compose it (platform/wing.ts, processes/wings.ts). */
import { defineWing } from '../../platform/wing.js';
import { verificationDataFamilies } from './data-families.js';
import { verificationSettingGroups } from './settings.js';

export const verificationWing = defineWing({
  name: 'verification',
  routes: () => import('./routes.js').then((m) => m.default),
  settings: verificationSettingGroups,
  tables: ['search_logs', 'disputes'],
  reads: [
    {
      table: 'operators',
      reason: 'a SearchLog page shows the operator behind each call by a join on the operator id (read-only; the sign-in wing keeps operators)',
    },
  ],
  dataFamilies: ({ db, config }) => verificationDataFamilies(db, { searchLogs: config.searchLogs.retentionDays }),
});
