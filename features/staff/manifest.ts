/** The staff wing as the processes compose it (platform/wing.ts, processes/wings.ts). */
import { defineWing } from '../../platform/wing.js';

export const staffWing = defineWing({
  name: 'staff',
  routes: () => import('./routes.js').then((m) => m.default),
  tables: [],
});
