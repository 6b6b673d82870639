/** The users wing as the processes compose it (platform/wing.ts, processes/wings.ts). */
import { defineWing } from '../../platform/wing.js';

export const usersWing = defineWing({
  name: 'users',
  tables: ['users', 'nin_links', 'bvn_links'],
});
