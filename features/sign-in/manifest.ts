/** The sign-in wing as the processes compose it (platform/wing.ts, processes/wings.ts). */
import { defineWing } from '../../platform/wing.js';
import { SIGN_IN_METRICS } from './metrics.js';
import { signInSettingGroups } from './settings.js';

export const signInWing = defineWing({
  name: 'sign-in',
  settings: signInSettingGroups,
  metrics: Object.values(SIGN_IN_METRICS),
  tables: ['operators', 'sessions', 'refresh_tokens', 'operator_recovery_codes', 'operator_devices'],
});
