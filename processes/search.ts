/** The `search` process (`npm run start:search`, Procfile `search`): one search replica (queue `search`) until SIGINT/SIGTERM. */
import { runProcess } from '../shared/shutdown.js';
import { startSearchWorker } from '../workers/search/worker.js';

await runProcess('search', (config, logger) => startSearchWorker(config, { logger }));
