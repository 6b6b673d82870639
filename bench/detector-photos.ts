/**
 * The detector's step on the photos the face-path bench compares, in one process: for each photo its
 * normalised size, the passes the detector runs, and the step's wall and CPU time (process.cpuUsage),
 * alternating the photos call by call so that both see the same load. Answers whether a detector step
 * that differs between two bench rows is the photo or the place it runs in.
 *
 *     NODE_ENV=development npx tsx bench/detector-photos.ts
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { performance } from 'node:perf_hooks';
import sharp from 'sharp';
import * as ort from 'onnxruntime-node';
import { FaceEngine } from '../features/face/worker/pipeline/engine.js';
import { detectPass, DEFAULT_DETECT_OPTIONS, wellInside } from '../features/face/worker/pipeline/detect.js';
import { decodeRgb, normaliseUpload } from '../platform/face/image.js';
import { ROOT, summarise } from './lib.js';

const CALLS = Number(process.env.BENCH_DP_CALLS ?? 60);
const engine = await FaceEngine.load(path.resolve(ROOT, process.env.FACE_MODELS_DIR ?? 'var/models'));
const face = (f: string) => readFileSync(path.join(ROOT, 'test/fixtures/faces', f));
const photos: Record<string, Buffer> = {
  // bench/face-path.ts's one-client photo (the raw child's `one`, the one-client /verify/self and /identify).
  portrait: await sharp(path.join(ROOT, 'test/fixtures/faces/grace_hopper_b.jpg')).resize(258, 282, { fit: 'cover' }).jpeg({ quality: 90 }).toBuffer(),
  // bench/face-path-session.ts's single capture and its raw engine (the session's centre frame).
  'astronaut-center': face('liveness/astronaut-center.jpg'),
};
const cpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};
const rows: Record<string, { decode: number[]; detectWall: number[]; detectCpu: number[]; passes: number; dims: string; bytes: number }> = {};
for (const [name, p] of Object.entries(photos)) {
  const n = await normaliseUpload(p);
  const img = await decodeRgb(n.jpeg);
  // The passes detectFaces runs on this image (its rule, step by step).
  const session = (engine as unknown as { sessions: { detect: ort.InferenceSession } }).sessions.detect;
  const first = await detectPass(session, img, 1, DEFAULT_DETECT_OPTIONS, 0);
  const skip = wellInside(first, img, 1, DEFAULT_DETECT_OPTIONS.skipPaddedWhenInside!);
  rows[name] = { decode: [], detectWall: [], detectCpu: [], passes: skip ? 1 : 2, dims: `${img.width}x${img.height}`, bytes: n.jpeg.length };
}
const normalised = Object.fromEntries(await Promise.all(Object.entries(photos).map(async ([k, p]) => [k, (await normaliseUpload(p)).jpeg] as const)));
for (let i = 0; i < 5; i++) for (const j of Object.values(normalised)) await engine.liveness(j, 'single');
for (let i = 0; i < CALLS; i++) {
  for (const [name, jpeg] of Object.entries(normalised)) {
    let c = cpuMs();
    let detectCpu = 0;
    await engine.liveness(jpeg, 'single', {
      clock: (step, ms) => {
        const now = cpuMs();
        if (step === 'decode') rows[name]!.decode.push(ms);
        if (step === 'detect') {
          rows[name]!.detectWall.push(ms);
          detectCpu = now - c;
        }
        c = now;
      },
    });
    rows[name]!.detectCpu.push(detectCpu);
  }
}
const load = readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
console.log(`${new Date().toISOString()} load ${load}, ${CALLS} calls per photo, alternated`);
console.log('| photo | normalised | JPEG bytes | detector passes | decode wall p50 | detect wall p50 / mean | detect CPU mean |');
console.log('|---|---|---|---|---|---|---|');
for (const [name, r] of Object.entries(rows)) {
  const w = summarise(r.detectWall);
  console.log(
    `| ${name} | ${r.dims} | ${r.bytes} | ${r.passes} | ${summarise(r.decode).p50.toFixed(1)} | ${w.p50.toFixed(1)} / ${w.mean.toFixed(1)} | ${summarise(r.detectCpu).mean.toFixed(1)} |`,
  );
}
await engine.release();
void performance;
