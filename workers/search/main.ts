/** The `search` process (`npm run start:search`, Procfile `search`): one search replica until SIGINT/SIGTERM. */
import { config, describeConfig } from '../../shared/config.js';
import { createLogger } from '../../shared/logger.js';
import { onShutdown } from '../../shared/shutdown.js';
import { startSearchWorker } from './worker.js';

const cfg = config();
const logger = createLogger({ level: cfg.logLevel, name: 'search' });
logger.info({ config: describeConfig(cfg) }, 'search worker starting');
try {
  const worker = await startSearchWorker(cfg, { logger });
  onShutdown(logger, () => worker.close());
} catch (e) {
  logger.fatal({ err: e instanceof Error ? e.message : String(e) }, 'search worker failed to start');
  process.exit(1);
}
