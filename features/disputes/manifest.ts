/** The disputes wing as the processes compose it (platform/wing.ts, processes/wings.ts). */
import { defineWing } from '../../platform/wing.js';
import { disputeDataFamilies } from './data-families.js';
import { disputeSettingGroups } from './settings.js';

export const disputesWing = defineWing({
  name: 'disputes',
  routes: () => import('./routes.js').then((m) => m.default),
  settings: disputeSettingGroups,
  tables: [],
  reads: [
    {
      table: 'disputes',
      reason:
        "its retention family deletes closed disputes past RETENTION_DAYS_DISPUTES; the rows themselves are written and read through verification's SearchLogs repository, beside the entries they dispute",
    },
  ],
  dataFamilies: ({ db, config }) => disputeDataFamilies(db, { disputes: config.disputes.retentionDays }),
});
