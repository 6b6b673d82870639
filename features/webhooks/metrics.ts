/** The webhooks wing's metrics, declared here and created on each process's registry (platform/metrics.ts). */
import { counterSpec } from '../../platform/metrics.js';

export const WEBHOOK_METRICS = {
  attempts: counterSpec({
    name: 'webhook_delivery_attempts_total',
    help: 'Webhook delivery attempts by outcome: succeeded, retry (failed; another attempt follows), failed (the last attempt failed: the delivery is given up)',
    labelNames: ['outcome'],
    zero: [{ outcome: 'succeeded' }, { outcome: 'retry' }, { outcome: 'failed' }],
  }),
};
