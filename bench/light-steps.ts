/**
 * CPU of each step of a light job, alone in one process, one step after the other
 * (`NODE_ENV=development npx tsx bench/light-steps.ts`; N=40 jobs of 4 frames). The face workers'
 * clocks (GET /clocks) cannot tell this: a `light` job runs beside the pose frames' `liveness` jobs in
 * the same process (one job per queue at a time), so its steps' wall time waits for them and its
 * `cpu.*` steps count their work too. Here the 4 JPEGs (the bench's centre frame at 480 px, q92,
 * each a little brighter) are decoded one by one, then the engine's light path runs on the pixels, every
 * face embedded as the service does (`LIGHT_STEPS_EMBED=0`: none, the embeddings' cost by difference).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import { FaceEngine } from '../features/face/worker/pipeline/engine.js';
import { faceGrid, sampleLightFrame } from '../platform/face/frame-measures.js';
import { decodeRgb } from '../platform/face/image.js';
import { ROOT } from './lib.js';

const engine = await FaceEngine.load(path.join(ROOT, 'var/models'), { intraOpThreads: 1 });
const centre = readFileSync(path.join(ROOT, 'test/fixtures/faces/liveness/astronaut-center.jpg'));
const jpegs = await Promise.all(
  [0, 1, 2, 3].map((k) =>
    sharp(centre)
      .modulate({ brightness: 1 + k * 0.02 })
      .resize(480, 480, { fit: 'inside' })
      .jpeg({ quality: 92 })
      .toBuffer(),
  ),
);
const cpu = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};
const N = Number(process.env.N ?? 40);
const sums: Record<string, number> = {};
for (let r = 0; r < N + 5; r++) {
  let c = cpu();
  const step = (name: string) => {
    const now = cpu();
    if (r >= 5) sums[name] = (sums[name] ?? 0) + now - c;
    c = now;
  };
  const pixels = [];
  for (const j of jpegs) pixels.push(await decodeRgb(j));
  step('decode (4 frames)');
  // Every frame's face embedded, as the service's light job does (LIGHT_STEPS_EMBED=0: none, for the difference).
  const name = (s: string) =>
    s === 'decode'
      ? 'decode (4 frames)'
      : s === 'landmarks'
        ? 'landmarks (first frame)'
        : s === 'track'
          ? 'track (3 frames)'
          : s === 'align' || s === 'embedModel'
            ? `${s} (4 frames)`
            : s;
  const res = await engine.lightFrames(pixels, process.env.LIGHT_STEPS_EMBED !== '0', (s) => step(name(s)));
  c = cpu();
  for (const [i, f] of res.frames.entries()) if (f.ok) faceGrid(res.pixels[i]!, f.face.landmarks5);
  step('grid (4 frames)');
  for (const [i, f] of res.frames.entries()) if (f.ok) sampleLightFrame(res.pixels[i]!, f.face.box);
  step('colour sample (4 frames)');
}
let total = 0;
for (const [k, v] of Object.entries(sums)) {
  total += v;
  console.log(`${k.padEnd(26)} ${(v / N).toFixed(2)} ms CPU`);
}
console.log(
  `${'a job of 4 frames'.padEnd(26)} ${(total / N).toFixed(2)} ms CPU; load average ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`,
);
await engine.release();
