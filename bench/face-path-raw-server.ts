/**
 * The raw engine for bench/face-path.ts's alternated rounds, kept alive in a process of its own (as a
 * face worker runs) so that its calls can take turns with the service's calls in one run: on a shared
 * machine both sides then see the same load. The same stage calls the face worker makes (the upload as
 * the API hands it on: a small JPEG checked, any other normalised;
 * the liveness stage, the embed stage; bench/face-path-raw-child.ts's `pipeline`), no queue, no HTTP.
 *
 * Protocol: one JSON line per call on stdin, `{ "photoB64": "..." }` (the photo is kept after the first
 * call: later lines may send `{}`); one JSON line per answer on stdout, `{ "ms": wall, "steps": {...} }`
 * (the stages' wall ms, and the engine's steps' wall and CPU ms: see `once`).
 * Not meant to be run by hand.
 */
import path from 'node:path';
import { createInterface } from 'node:readline';
import { performance } from 'node:perf_hooks';
import { FaceEngine } from '../features/face/worker/pipeline/engine.js';
import { uploadForJob } from '../platform/face/image.js';
import { ROOT } from './lib.js';

const threads = Number(process.env.BENCH_RAW_THREADS ?? 1);
const engine = await FaceEngine.load(path.resolve(ROOT, process.env.FACE_MODELS_DIR ?? 'var/models'), { intraOpThreads: threads });
let photo: Buffer | null = null;

const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

/**
 * One call; `steps` holds the stages' wall ms, the engine's steps as the face worker's clocks name them
 * (`liveness.detect`, ...) and each step's CPU ms (`cpu.detect`, ...: this process's CPU since the step
 * before), so that the bench sets the worker's clocks beside the engine's for the same photo.
 */
async function once(p: Buffer): Promise<{ ms: number; steps: Record<string, number> }> {
  const steps: Record<string, number> = {};
  let c = cpuMs();
  const clock = (prefix: string) => (step: string, ms: number) => {
    const now = cpuMs();
    steps[`${prefix}.${step}`] = (steps[`${prefix}.${step}`] ?? 0) + ms;
    steps[`cpu.${step}`] = (steps[`cpu.${step}`] ?? 0) + now - c;
    c = now;
  };
  const t = performance.now();
  // As the API hands a selfie to its job (FaceService.jobImage): a small JPEG as it came, header checked.
  const n = await uploadForJob(p);
  steps.normalise = performance.now() - t;
  c = cpuMs();
  let s = performance.now();
  const live = await engine.liveness(n.jpeg, 'largest', { align: true, clock: clock('liveness') });
  steps.liveness = performance.now() - s;
  c = cpuMs();
  s = performance.now();
  await engine.embedAligned(live.aligned!, clock('embed'));
  steps.embed = performance.now() - s;
  return { ms: performance.now() - t, steps };
}

process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
for await (const line of createInterface({ input: process.stdin })) {
  if (!line.trim()) continue;
  const msg = JSON.parse(line) as { photoB64?: string };
  if (msg.photoB64) photo = Buffer.from(msg.photoB64, 'base64');
  if (!photo) throw new Error('no photo yet');
  process.stdout.write(`${JSON.stringify(await once(photo))}\n`);
}
await engine.release();
