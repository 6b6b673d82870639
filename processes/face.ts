/** The `face` process (`npm run start:face`, Procfile `face`): the face worker (queues `liveness`, `embed`) until SIGINT/SIGTERM. */
import { runProcess } from '../shared/shutdown.js';
import { startFaceWorker } from '../workers/face/worker.js';

await runProcess('face', (config, logger) => startFaceWorker(config, { logger }));
