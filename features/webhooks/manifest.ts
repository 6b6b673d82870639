/** The webhooks wing as the processes compose it (platform/wing.ts, processes/wings.ts). */
import { defineWing } from '../../platform/wing.js';
import { webhookDataFamilies } from './data-families.js';
import { webhookContract } from './job.js';
import { WEBHOOK_METRICS } from './metrics.js';
import { WEBHOOK_SECRETS } from './sealed-families.js';
import { webhookSettingGroups } from './settings.js';

declare module '../../platform/keys/key-ring.js' {
  interface KeyPurposes {
    'webhook-secrets': true;
  }
}

export const webhooksWing = defineWing({
  name: 'webhooks',
  routes: () => import('./routes.js').then((m) => m.default),
  settings: webhookSettingGroups,
  tables: ['webhook_endpoints', 'webhook_events', 'webhook_deliveries', 'webhook_delivery_attempts'],
  metrics: Object.values(WEBHOOK_METRICS),
  keyPurposes: { 'webhook-secrets': 'webhook endpoint signing secrets' },
  sealedFamilies: [WEBHOOK_SECRETS],
  jobs: [webhookContract],
  workers: { background: () => import('./worker/worker.js').then((m) => m.webhookBackgroundWorker) },
  dataFamilies: ({ db, config }) => webhookDataFamilies(db, { webhookEvents: config.webhooks.retentionDays }),
});
