/** The verification wing as the processes compose it (platform/wing.ts, processes/wings.ts). */
import { defineWing } from '../../platform/wing.js';

export const verificationWing = defineWing({
  name: 'verification',
  tables: ['search_logs', 'disputes'],
  reads: [
    {
      table: 'operators',
      reason: 'a SearchLog page shows the operator behind each call by a join on the operator id (read-only; the sign-in wing keeps operators)',
    },
  ],
});
