/**
 * The raw engine's throughput in a fresh process of its own (as the face worker runs): normalise +
 * liveness + embed on the fixture photos with a face, `inFlight` at a time, for `seconds`. Prints one
 * JSON line. Used by bench/identify-e2e.ts; not meant to be run by hand.
 */
import path from 'node:path';
import { FaceEngine } from '../features/face/worker/pipeline/engine.js';
import { normaliseUpload } from '../platform/face/image.js';
import { isFaceError } from '../platform/face/face-error.js';
import { ROOT, closedLoop } from './lib.js';
import { fixturePhotos } from './stages.js';

const { seconds, inFlight, threads } = JSON.parse(process.argv[2] ?? '{}') as { seconds: number; inFlight: number; threads: number };

async function pipeline(engine: FaceEngine, photo: Buffer): Promise<void> {
  const n = await normaliseUpload(photo);
  try {
    const live = await engine.liveness(n.jpeg, 'largest');
    await engine.embed(n.jpeg, live.face.landmarks5);
  } catch (e) {
    if (!isFaceError(e)) throw e;
  }
}

const engine = await FaceEngine.load(path.resolve(ROOT, process.env.FACE_MODELS_DIR ?? 'var/models'), { intraOpThreads: threads });
const photos = fixturePhotos()
  .filter((p) => !p.kind.startsWith('no face'))
  .map((p) => p.data);
for (const p of photos) await pipeline(engine, p); // warm
const run = await closedLoop(inFlight, seconds, photos, (p) => pipeline(engine, p));
await engine.release();
process.stdout.write(`${JSON.stringify({ done: run.done, perSecond: run.perSecond, cpuMs: run.cpuMsPerCall, samples: run.samples })}\n`);
