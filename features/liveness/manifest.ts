/** The liveness wing as the processes compose it (platform/wing.ts, processes/wings.ts). */
import { defineWing } from '../../platform/wing.js';
import { livenessSettingGroups } from './settings.js';

export const livenessWing = defineWing({
  name: 'liveness',
  settings: livenessSettingGroups,
  tables: [],
});
