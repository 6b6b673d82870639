/** The `search` process (`npm run start:search`, Procfile `search`): one search replica (queue `search`) until SIGINT/SIGTERM. */
import './wings.js';
import { runProcess } from '../platform/processes/shutdown.js';
import { startSearchWorker } from '../features/search/worker/worker.js';

await runProcess('search', (config, logger) => startSearchWorker(config, { logger }));
