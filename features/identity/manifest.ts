/** The identity wing as the processes compose it (platform/wing.ts, processes/wings.ts). */
import { defineWing } from '../../platform/wing.js';
import { identitySettingGroups } from './settings.js';

export const identityWing = defineWing({
  name: 'identity',
  settings: identitySettingGroups,
  tables: [],
});
