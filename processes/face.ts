/** The `face` process (`npm run start:face`, Procfile `face`): the wings' `face` workers (the face wing's: queues `liveness`, `embed`, `light`) until SIGINT/SIGTERM. */
import './wings.js';
import { runProcess } from '../platform/processes/shutdown.js';
import { startWingWorkers } from './wing-workers.js';

await runProcess('face', (config, logger) => startWingWorkers('face', { config, logger }));
