/**
 * The `upstream` process (`npm run start:upstream`): the upstream and webhook workers on their own, for deployments
 * that set UPSTREAM_WORKER_IN_WEB=false on the web processes so that the confirmations do not share
 * the API's event loop.
 */
import { createDb } from '../shared/db.js';
import { runProcess } from '../shared/shutdown.js';
import { TokenService } from '../api/services/token-service.js';
import { WEBHOOK_SECRET_KEY_PURPOSE } from '../shared/webhook-secrets.js';
import { startUpstreamWorker } from '../workers/upstream/worker.js';
import { startWebhookWorker } from '../workers/webhooks/worker.js';

await runProcess('upstream', async (config, logger) => {
  const db = createDb(config.database.url, config.database.poolMax);
  try {
    const worker = await startUpstreamWorker(config, { db, logger });
    const webhooks = await startWebhookWorker(config, { db, logger, secretsKey: new TokenService(config).deriveSecret(WEBHOOK_SECRET_KEY_PURPOSE) });
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
