/** The verification wing as the processes compose it (platform/wing.ts, processes/wings.ts). */
import { defineWing } from '../../platform/wing.js';

export const verificationWing = defineWing({
  name: 'verification',
  tables: ['search_logs', 'disputes'],
});
