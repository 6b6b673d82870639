/**
 * The detector's CPU on the first captures after a face engine loads (the JavaScript around the model
 * is not yet optimised by V8 on the first calls): a fresh process, the engine loaded as a face process
 * loads it, then 12 liveness stages on one photo; the detector step's share of each stage's CPU.
 * `warm` first runs the detector's whole step 5 times on a textured image (what FaceEngine.load's
 * warm-up now does itself).
 *
 *   NODE_ENV=development npx tsx bench/detector-first-calls.ts [warm]
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { FaceEngine } from '../features/face/worker/pipeline/engine.js';
import { detectFaces, DEFAULT_DETECT_OPTIONS } from '../features/face/worker/pipeline/detect.js';
import { normaliseUpload } from '../platform/face/image.js';
const ROOT = path.resolve(import.meta.dirname, '..');
const engine = await FaceEngine.load(path.join(ROOT, 'var/models'));
const n = await normaliseUpload(readFileSync(path.join(ROOT, 'test/fixtures/faces/lfw/Bush_2.png')));
if (process.argv[2] === 'warm') {
  const w = 480,
    h = 360;
  const data = new Uint8Array(w * h * 3);
  for (let i = 0; i < data.length; i++) data[i] = (i * 7919) % 251;
  const sess = (engine as unknown as { sessions: { detect: import('onnxruntime-node').InferenceSession } }).sessions.detect;
  for (let i = 0; i < 5; i++) await detectFaces(sess, { width: w, height: h, data } as never, DEFAULT_DETECT_OPTIONS);
}
const out: string[] = [];
for (let i = 0; i < 12; i++) {
  let d = 0;
  const c0 = process.cpuUsage();
  const t0 = performance.now();
  await engine.liveness(n.jpeg, 'largest', {
    align: true,
    clock: (k, ms) => {
      if (k === 'detect') d += ms;
    },
  });
  const c = process.cpuUsage(c0);
  const wall = performance.now() - t0;
  out.push(`${((((c.user + c.system) / 1000) * d) / wall).toFixed(1)}`);
}
console.log(process.argv[2] ?? 'cold', 'detector CPU ms, calls 1..12:', out.join(' '));
process.exit(0);
