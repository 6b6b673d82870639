/** The webhooks wing as the processes compose it (platform/wing.ts, processes/wings.ts). */
import { defineWing } from '../../platform/wing.js';
import { webhookDataFamilies } from './data-families.js';
import { WEBHOOK_METRICS } from './metrics.js';
import { webhookSettingGroups } from './settings.js';

export const webhooksWing = defineWing({
  name: 'webhooks',
  settings: webhookSettingGroups,
  tables: ['webhook_endpoints', 'webhook_events', 'webhook_deliveries', 'webhook_delivery_attempts'],
  metrics: Object.values(WEBHOOK_METRICS),
  dataFamilies: ({ db, config }) => webhookDataFamilies(db, { webhookEvents: config.webhooks.retentionDays }),
});
