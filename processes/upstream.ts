/**
 * The `upstream` process (`npm run start:upstream`): the upstream and webhook workers on their own, for deployments
 * that set UPSTREAM_WORKER_IN_WEB=false on the web processes so that the confirmations do not share
 * the API's event loop.
 */
import './wings.js';
import { createDb } from '../platform/database/db.js';
import { runProcess } from '../platform/processes/shutdown.js';
import { keyRingOf } from '../platform/keys/templates.js';
import { startUpstreamWorker } from './upstream/worker.js';
import { startWebhookWorker } from '../features/webhooks/worker/worker.js';

await runProcess('upstream', async (config, logger) => {
  const db = createDb(config.database.url, config.database.poolMax);
  try {
    const worker = await startUpstreamWorker(config, { db, logger });
    const webhooks = await startWebhookWorker(config, { db, logger, keyRing: keyRingOf(config) });
    return {
      close: async () => {
        await worker.close();
        await webhooks.close();
        await db.destroy();
      },
    };
  } catch (e) {
    await db.destroy();
    throw e;
  }
});
