/**
 * The `upstream` process (`npm run start:upstream`): the upstream worker on its own, for deployments
 * that set UPSTREAM_WORKER_IN_WEB=false on the web processes so that the confirmations do not share
 * the API's event loop.
 */
import { createDb } from '../shared/db.js';
import { runProcess } from '../shared/shutdown.js';
import { startUpstreamWorker } from '../workers/upstream/worker.js';

await runProcess('upstream', async (config, logger) => {
  const db = createDb(config.database.url, config.database.poolMax);
  try {
    const worker = await startUpstreamWorker(config, { db, logger });
    return {
      close: async () => {
        await worker.close();
        await db.destroy();
      },
    };
  } catch (e) {
    await db.destroy();
    throw e;
  }
});
