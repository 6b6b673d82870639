/** The `face` process (`npm run start:face`, Procfile `face`): the face worker until SIGINT/SIGTERM. */
import { config, describeConfig } from '../../shared/config.js';
import { createLogger } from '../../shared/logger.js';
import { onShutdown } from '../../shared/shutdown.js';
import { startFaceWorker } from './worker.js';

const cfg = config();
const logger = createLogger({ level: cfg.logLevel, name: 'face' });
logger.info({ config: describeConfig(cfg) }, 'face worker starting');
try {
  const worker = await startFaceWorker(cfg, { logger });
  onShutdown(logger, () => worker.close());
} catch (e) {
  logger.fatal({ err: e instanceof Error ? e.message : String(e) }, 'face worker failed to start');
  process.exit(1);
}
