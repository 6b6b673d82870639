/** The reports wing as the processes compose it (platform/wing.ts, processes/wings.ts). */
import { defineWing } from '../../platform/wing.js';
import { reportSettingGroups } from './settings.js';

export const reportsWing = defineWing({
  name: 'reports',
  routes: () => import('./routes.js').then((m) => m.default),
  settings: reportSettingGroups,
  tables: [],
});
