/**
 * Writes the frames the liveness HTTP tests send (test/fixtures/faces/liveness/), synthesised from
 * the fixture photos by scripts/evaluate/liveness-views.ts (how, and what it means: that module and
 * docs/face-engine.md "Liveness sessions"). Run again after changing the views:
 *
 *   npx tsx scripts/evaluate/make-liveness-fixtures.ts
 *
 * The tests make each frame's bytes unique themselves (the service refuses any frame it received
 * before: `replayed_frames`).
 */
import { mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { FaceEngine } from '../../features/face/worker/pipeline/engine.js';
import { normaliseUpload } from '../../platform/face/image.js';
import { FIXTURES_DIR } from '../../test/fixtures/faces/labels.js';
import { decodeRgb, encodeJpeg, flatTilt, STEP_POSES, synthView, type Pt } from './liveness-views.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const OUT = path.join(FIXTURES_DIR, 'liveness');

async function main(): Promise<void> {
  mkdirSync(OUT, { recursive: true });
  const engine = await FaceEngine.load(path.join(ROOT, 'var/models'));
  const write = async (name: string, jpeg: Buffer) => writeFileSync(path.join(OUT, name), jpeg);
  for (const [source, stem] of [
    ['lfw/Bush_2.png', 'bush2'],
    ['lfw/Chavez_1.png', 'chavez'],
    ['astronaut.png', 'astronaut'],
  ] as const) {
    const { jpeg } = await normaliseUpload(readFileSync(path.join(FIXTURES_DIR, source)));
    const face = await engine.liveness(jpeg, 'largest', { quality: false });
    const l5 = face.face.landmarks5 as Pt[];
    const rgb = await decodeRgb(jpeg);
    let seed = 1;
    for (const [step, pose] of Object.entries(STEP_POSES)) {
      await write(`${stem}-${step}.jpg`, await encodeJpeg(synthView(rgb, l5, { ...pose, scale: 1 + 0.01 * seed, dx: seed, noiseSeed: seed++ })));
    }
    // A second centre frame: the person back at centre, a little closer and aside.
    await write(`${stem}-center2.jpg`, await encodeJpeg(synthView(rgb, l5, { yaw: 2, scale: 1.03, dx: -3, dy: 2, noiseSeed: 99 })));
    // The photo itself, moved and re-encoded (one picture jittered: static_capture).
    await write(`${stem}-jitter1.jpg`, await encodeJpeg(synthView(rgb, l5, { scale: 1.04, dx: 4, dy: -3, noiseSeed: 11 }), 80));
    await write(`${stem}-jitter2.jpg`, await encodeJpeg(synthView(rgb, l5, { scale: 0.97, dx: -5, dy: 2, noiseSeed: 12 }), 70));
    // A print of the photo turned in front of the camera, as the steps ask (the plane shows no turn).
    await write(`${stem}-flat-turn_left.jpg`, await encodeJpeg(flatTilt(rgb, l5, { yaw: 25, print: true, noiseSeed: 21 })));
    await write(`${stem}-flat-turn_right.jpg`, await encodeJpeg(flatTilt(rgb, l5, { yaw: -25, print: true, noiseSeed: 22 })));
    await write(`${stem}-flat-look_up.jpg`, await encodeJpeg(flatTilt(rgb, l5, { pitch: 20, print: true, noiseSeed: 23 })));
  }
  await engine.release();
}

await main();
