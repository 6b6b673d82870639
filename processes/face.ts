/** The `face` process (`npm run start:face`, Procfile `face`): the face worker (queues `liveness`, `embed`) until SIGINT/SIGTERM. */
import './wings.js';
import { runProcess } from '../platform/processes/shutdown.js';
import { startFaceWorker } from '../features/face/worker/worker.js';

await runProcess('face', (config, logger) => startFaceWorker(config, { logger }));
