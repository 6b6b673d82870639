/**
 * The `upstream` process (`npm run start:upstream`): the background queues on their own (the floor's
 * retention sweep and every wing's `background` worker, processes/wing-workers.ts), for deployments
 * that set UPSTREAM_WORKER_IN_WEB=false on the web processes so that this work does not share the API's
 * event loop.
 */
import './wings.js';
import { createDb } from '../platform/database/db.js';
import { runProcess } from '../platform/processes/shutdown.js';
import { keyRingOf } from '../platform/keys/templates.js';
import { startBackgroundWorkers } from './wing-workers.js';

await runProcess('upstream', async (config, logger) => {
  const db = createDb(config.database.url, config.database.poolMax);
  try {
    const workers = await startBackgroundWorkers({ config, logger, db, keyRing: keyRingOf(config) });
    return {
      close: async () => {
        await workers.close();
        await db.destroy();
      },
    };
  } catch (e) {
    await db.destroy();
    throw e;
  }
});
