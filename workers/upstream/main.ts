/**
 * The `upstream` worker as a process of its own (run it with UPSTREAM_WORKER_IN_WEB=false on the web
 * processes when the upstream confirmations should not share the API's event loop).
 */
import { config } from '../../shared/config.js';
import { createDb } from '../../shared/db.js';
import { createLogger } from '../../shared/logger.js';
import { onShutdown } from '../../shared/shutdown.js';
import { startUpstreamWorker } from './worker.js';

const cfg = config();
const logger = createLogger({ level: cfg.logLevel, name: 'upstream' });
const db = createDb(cfg.databaseUrl, cfg.databasePoolMax);
const worker = startUpstreamWorker(cfg, { db, logger });
logger.info('upstream worker started');

onShutdown(logger, async () => {
  await worker.close();
  await db.destroy();
});
