/** The `search` process (`npm run start:search`, Procfile `search`): the wings' `search` workers (one replica of the index, queue `search`) until SIGINT/SIGTERM. */
import './wings.js';
import { runProcess } from '../platform/processes/shutdown.js';
import { startWingWorkers } from './wing-workers.js';

await runProcess('search', (config, logger) => startWingWorkers('search', { config, logger }));
