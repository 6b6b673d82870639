/**
 * A worker process for test/face-chain.test.ts, on the project's runner (platform/worker-runtime/run-queue.ts) with
 * stand-in handlers, so that a test can hold one process's main thread the way the face models do.
 *
 *   CHAIN_ROLE=busy   serves `liveness` and `embed`; its liveness handler adds the job's `embedNext`
 *                     as a job of its own (JobContext.followOn, not awaited: the protocol's follow-on to a
 *                     queue the adding process serves; the face worker now embeds in place) where the engine
 *                     does, holds its main thread CHAIN_CROP_MS (the next model's input prepared),
 *                     yields once, holds it CHAIN_BUSY_MS (like an onnxruntime run), then answers.
 *   CHAIN_ROLE=idle   serves `embed` only.
 *
 * Every embed answers `{ pid, at }` (this process, the epoch ms it ran). Prints `ready` when serving.
 */
import { setImmediate as yieldOnce } from 'node:timers/promises';
import { loadConfig } from '../../processes/config.js';
import type { EmbedResult, LivenessJobResult } from '../../platform/jobs/index.js';
import { createLogger } from '../../platform/logger.js';
import { runQueues } from '../../platform/worker-runtime/run-queue.js';

const role = process.env.CHAIN_ROLE;
const busyMs = Number(process.env.CHAIN_BUSY_MS ?? 1000);
const cropMs = Number(process.env.CHAIN_CROP_MS ?? 50);

function holdMainThread(ms: number): void {
  const until = Date.now() + ms;
  while (Date.now() < until);
}
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
            // As the engine runs: the face is aligned in the continuation of a model run, which
            // onnxruntime-node makes a setImmediate callback; so the follow-on is added in the event
            // loop's check phase, and a poll phase comes before the next model run.
            await yieldOnce();
            const next = job.embedNext!;
            const added = ctx.followOn('embed', next.jobId, { alignedFaceRef: job.imageRef, alignedFaceSalt: job.resultSalt, resultSalt: next.resultSalt });
            await added.written;
            holdMainThread(cropMs); // the anti-spoof model's input, cropped and resized in JavaScript
            await yieldOnce(); // the model's run, a setImmediate callback
            holdMainThread(busyMs); // the main thread held, like onnxruntime's synchronous run
            await added.added;
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
