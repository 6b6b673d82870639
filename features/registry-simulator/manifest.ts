/** The registry-simulator wing as the processes compose it (platform/wing.ts, processes/wings.ts). */
import { defineWing } from '../../platform/wing.js';

export const registrySimulatorWing = defineWing({
  name: 'registry-simulator',
  routes: () => import('./routes.js').then((m) => m.default),
  tables: ['registry_persons'],
});
