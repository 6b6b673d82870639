/**
 * A worker process for test/face-chain.test.ts, on the project's runner (platform/worker-runtime/run-queue.ts) with
 * stand-in handlers, so that a test can hold one process's main thread the way the face models do.
 *
 *   CHAIN_ROLE=busy   serves `liveness` and `embed`; its liveness handler adds the job's `embedNext`
 *                     (JobContext.followOn, not awaited, as the face worker does), then blocks its
 *                     main thread for CHAIN_BUSY_MS (like an onnxruntime run), then answers.
 *   CHAIN_ROLE=idle   serves `embed` only.
 *
 * Every embed answers `{ pid, at }` (this process, the epoch ms it ran). Prints `ready` when serving.
 */
import { setImmediate as yieldOnce } from 'node:timers/promises';
import { loadConfig } from '../../platform/config.js';
import type { EmbedResult, LivenessJobResult } from '../../platform/jobs/index.js';
import { createLogger } from '../../platform/logger.js';
import { runQueues } from '../../platform/worker-runtime/run-queue.js';

const role = process.env.CHAIN_ROLE;
const busyMs = Number(process.env.CHAIN_BUSY_MS ?? 1000);
const config = loadConfig({ NODE_ENV: 'test', REDIS_URL: process.env.REDIS_URL!, REDIS_PREFIX: process.env.REDIS_PREFIX! });
const logger = createLogger({ level: 'silent' });

const embed = async (): Promise<EmbedResult> => ({ pid: process.pid, at: Date.now() }) as unknown as EmbedResult;

const runner =
  role === 'busy'
    ? await runQueues(
        config,
        ['liveness', 'embed'],
        {
          liveness: async (job, ctx): Promise<LivenessJobResult> => {
            const next = job.embedNext!;
            const added = ctx.followOn('embed', next.jobId, { alignedFaceRef: job.imageRef, alignedFaceSalt: job.resultSalt, resultSalt: next.resultSalt });
            await yieldOnce(); // as the engine does before its next model run
            const until = Date.now() + busyMs;
            while (Date.now() < until); // the main thread held, like onnxruntime's synchronous run
            await added;
            return { ok: false, code: 'no_face', faceCount: 0, ms: busyMs };
          },
          embed,
        },
        { logger, concurrency: 1 },
      )
    : await runQueues(config, ['embed'], { embed }, { logger, concurrency: 1 });

process.stdout.write('ready\n');
process.on('SIGTERM', () => {
  void runner.close().then(() => process.exit(0));
});
