/** The system wing as the processes compose it (platform/wing.ts, processes/wings.ts). */
import { defineWing } from '../../platform/wing.js';
import { systemSettingGroups } from './settings.js';

export const systemWing = defineWing({
  name: 'system',
  settings: systemSettingGroups,
  tables: [],
});
