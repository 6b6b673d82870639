/**
 * The raw engine for bench/face-path.ts, in a fresh process of its own (as a face worker runs):
 * the same stage calls the face worker makes, with no queue, no HTTP and no base64 — the upload as the
 * API hands it on (checked, or normalised), the liveness stage, the embed stage — on the same photos as the system. Prints one JSON
 * line. Arguments (JSON) on stdin. Not meant to be run by hand.
 *
 * - `one`: the one-client photo, `oneCalls` times in a row after warm-up: wall ms per call and per stage.
 * - `perPhoto`: wall ms p50 of each photo with a face (5 calls each).
 * - `loop`: the photos with a face, one in flight, for `seconds`: images/s and CPU ms per image.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import { FaceEngine, type StepClock } from '../features/face/worker/pipeline/engine.js';
import { uploadForJob } from '../platform/face/image.js';
import { isFaceError } from '../platform/face/face-error.js';
import { ROOT, closedLoop, summarise } from './lib.js';

interface Args {
  seconds: number;
  threads: number;
  oneCalls: number;
  /** Base64 photos: [0] is the one-client photo, the rest the load set (all with a face). */
  onePhotoB64: string;
  photosB64: string[];
}

const args = JSON.parse(readFileSync(0, 'utf8')) as Args; // on stdin: the photos are too large for argv

/** The face path's stages as the worker runs them (kept in step with features/face/worker/worker.ts). */
async function pipeline(engine: FaceEngine, photo: Buffer, clock?: StepClock): Promise<{ normalise: number; liveness: number; embed: number }> {
  let t = performance.now();
  // As the API hands a capture that is never stored to its job: a JPEG within the normalised size as it
  // came (its header checked), any other upload normalised (FaceService.jobImage).
  const n = await uploadForJob(photo);
  const normalise = performance.now() - t;
  t = performance.now();
  try {
    const live = await engine.liveness(n.jpeg, 'largest', { align: true, clock: clock && ((k, ms) => clock(`liveness.${k}`, ms)) });
    const liveness = performance.now() - t;
    t = performance.now();
    // An engine without embedAligned (an older commit measured for comparison) embeds from the image.
    if (typeof engine.embedAligned === 'function') await engine.embedAligned(live.aligned!, clock && ((k, ms) => clock(`embed.${k}`, ms)));
    else await engine.embed(n.jpeg, live.face.landmarks5);
    return { normalise, liveness, embed: performance.now() - t };
  } catch (e) {
    if (!isFaceError(e)) throw e;
    return { normalise, liveness: performance.now() - t, embed: 0 };
  }
}

const engine = await FaceEngine.load(path.resolve(ROOT, process.env.FACE_MODELS_DIR ?? 'var/models'), { intraOpThreads: args.threads });
const one = Buffer.from(args.onePhotoB64, 'base64');
const photos = args.photosB64.map((b) => Buffer.from(b, 'base64'));
for (const p of [one, ...photos]) await pipeline(engine, p); // warm every shape
for (let i = 0; i < 5; i++) await pipeline(engine, one);

const oneWall: number[] = [];
const oneStages = { normalise: [] as number[], liveness: [] as number[], embed: [] as number[] };
const oneSteps: Record<string, number> = {};
const stepClock: StepClock = (k, ms) => {
  oneSteps[k] = (oneSteps[k] ?? 0) + ms / args.oneCalls;
};
for (let i = 0; i < args.oneCalls; i++) {
  const t = performance.now();
  const s = await pipeline(engine, one, stepClock);
  oneWall.push(performance.now() - t);
  oneStages.normalise.push(s.normalise);
  oneStages.liveness.push(s.liveness);
  oneStages.embed.push(s.embed);
}
const perPhoto: number[] = [];
for (const p of photos) {
  const xs: number[] = [];
  for (let i = 0; i < 5; i++) {
    const t = performance.now();
    await pipeline(engine, p);
    xs.push(performance.now() - t);
  }
  perPhoto.push(summarise(xs).p50);
}
const loop = await closedLoop(1, args.seconds, photos, (p) => pipeline(engine, p));
await engine.release();
process.stdout.write(
  `${JSON.stringify({
    one: {
      wall: oneWall,
      steps: oneSteps,
      normalise: summarise(oneStages.normalise).p50,
      liveness: summarise(oneStages.liveness).p50,
      embed: summarise(oneStages.embed).p50,
    },
    perPhoto,
    loop: { done: loop.done, perSecond: loop.perSecond, cpuMs: loop.cpuMsPerCall },
  })}\n`,
);
