/** The system wing as the processes compose it (platform/wing.ts, processes/wings.ts). */
import { defineWing } from '../../platform/wing.js';
import { systemSettingGroups } from './settings.js';

export const systemWing = defineWing({
  name: 'system',
  routes: async () => {
    const [system, queues] = await Promise.all([import('./routes.js'), import('./admin-queues-routes.js')]);
    return (deps) => [...system.default(deps), ...queues.adminQueueRoutes(deps)];
  },
  settings: systemSettingGroups,
  tables: [],
});
