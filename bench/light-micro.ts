/**
 * CPU of a light job's steps and of the web process's share of a light frame, in one process, no
 * queue (`NODE_ENV=development npx tsx bench/light-micro.ts`; N=30 calls each): process CPU
 * (onnxruntime's and libvips' threads included) per call, so a figure that holds on a loaded machine
 * better than wall time does. The face at 480 px is the bench's light frame (the centre frame).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type * as ort from 'onnxruntime-node';
import sharp from 'sharp';
import { FaceEngine } from '../features/face/worker/pipeline/engine.js';
import { detectFaces, DEFAULT_DETECT_OPTIONS } from '../features/face/worker/pipeline/detect.js';
import { predictLandmarks, squareBox } from '../features/face/worker/pipeline/landmarks.js';
import { faceGrid } from '../features/liveness/frame-sketch.js';
import { sampleLightFrame } from '../features/liveness/light-response.js';
import { decodeRgb, normaliseUpload, normaliseUploadRgb } from '../platform/face/image.js';
import { ROOT } from './lib.js';

const engine = await FaceEngine.load(path.join(ROOT, 'var/models'), { intraOpThreads: 1 });
const sessions = (engine as unknown as { sessions: Record<'detect' | 'landmark', ort.InferenceSession> }).sessions;
const centre = readFileSync(path.join(ROOT, 'test/fixtures/faces/liveness/astronaut-center.jpg'));
const small = await sharp(centre).resize(480, 480, { fit: 'inside' }).jpeg({ quality: 92 }).toBuffer();
const N = Number(process.env.N ?? 30);
const cpuOf = async (name: string, f: () => unknown) => {
  for (let i = 0; i < 3; i++) await f();
  const c0 = process.cpuUsage();
  for (let i = 0; i < N; i++) await f();
  const c = process.cpuUsage(c0);
  console.log(`${name.padEnd(48)} ${((c.user + c.system) / 1000 / N).toFixed(2)} ms CPU`);
};
const img = await decodeRgb(small);
const dets = await detectFaces(sessions.detect, img, DEFAULT_DETECT_OPTIONS);
const face = (await engine.lightFrames([img], true)).frames[0]!;
if (!face.ok) throw new Error('no face in the light frame');
console.log(
  `light frame ${img.width}×${img.height}, face box height ${Math.round(dets[0]!.y2 - dets[0]!.y1)} px; load average ${readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')}`,
);
await cpuOf('light job of 4 frames, JPEGs (decoded in the job)', () => engine.lightFrames([small, small, small, small], true));
await cpuOf('light job of 4 frames, pixels', () => engine.lightFrames([img, img, img, img], true));
await cpuOf('  decodeRgb (480 px JPEG)', () => decodeRgb(small));
await cpuOf('  detector, both passes', () => detectFaces(sessions.detect, img, { ...DEFAULT_DETECT_OPTIONS, skipPaddedWhenInside: null }));
await cpuOf('  detector, plain pass only', () => detectFaces(sessions.detect, img, { ...DEFAULT_DETECT_OPTIONS, passes: [1], skipPaddedWhenInside: null }));
await cpuOf('  landmarks on a box', () => predictLandmarks(sessions.landmark, img, squareBox(dets[0]!)));
await cpuOf('web: normalise to a JPEG, then decode it (before)', async () => decodeRgb((await normaliseUpload(small, { maxSide: 480 })).jpeg));
await cpuOf('web: normalise to pixels (normaliseUploadRgb)', () => normaliseUploadRgb(small, { maxSide: 480 }));
await cpuOf('web: the face grid (faceGrid)', () => faceGrid(img, face.face.landmarks5));
await cpuOf('web: the colour sample (sampleLightFrame)', () => sampleLightFrame(img, face.face.box));
await engine.release();
