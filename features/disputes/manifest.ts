/** The disputes wing as the processes compose it (platform/wing.ts, processes/wings.ts). */
import { defineWing } from '../../platform/wing.js';

export const disputesWing = defineWing({
  name: 'disputes',
  tables: [],
});
