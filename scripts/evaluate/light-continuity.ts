/**
 * The figures behind the light frames' identity (features/liveness/README.md "Light frames' face"):
 * the cosine of two light frames' face grids (frame-sketch.ts `faceGrid`, placed by the landmarks the
 * face path finds; the grid cosine the service judged by until 29 November 2026, 0.78) and of their face
 * embeddings (MobileFaceNet, aligned on the same points: what the service judges every light frame
 * by, LIGHT_SAME_PERSON_COSINE) for one person lit by different colours and moving a little, against two
 * different people.
 *
 *   npx tsx scripts/evaluate/light-continuity.ts
 *
 * Frames: the liveness fixtures' frontal frames (centre, a second centre, two jittered: the person
 * moving a little between light frames) and the fixture photos, each lit by every colour of SPEC 14.1
 * at the default reflection and at 2.5 times it (scripts/evaluate/light-sim.ts), with sensor noise,
 * then made at most 480 px on the long side as the service makes light frames. Landmarks by the real
 * models (the face path's detector and landmark model). "Same" pairs: two frames of one capture
 * (one person, one photo's frames) in any two colours; "different": two people.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import sharp from 'sharp';
import { FaceEngine } from '../../features/face/worker/pipeline/engine.js';
import { faceGrid } from '../../features/liveness/frame-sketch.js';
import { LIGHT_COLOURS } from '../../features/liveness/light-response.js';
import { decodeRgb as decodePixels } from '../../platform/face/image.js';
import { PROJECT_ROOT } from '../../platform/paths.js';
import { addNoise, relight } from './light-sim.js';
import { decodeRgb, encodeJpeg, rng } from './liveness-views.js';

const FACES = path.join(PROJECT_ROOT, 'test/fixtures/faces');
/** Person, capture (frames of one capture are continuous), file. */
const SOURCES: [string, string, string][] = [
  ...['bush2', 'astronaut', 'chavez'].flatMap((p) =>
    ['center', 'center2', 'jitter1', 'jitter2'].map((v): [string, string, string] => [p === 'bush2' ? 'bush' : p, `${p}-live`, `liveness/${p}-${v}.jpg`]),
  ),
  ['bush', 'Bush_1', 'lfw/Bush_1.png'],
  ['bush', 'Bush_3', 'lfw/Bush_3.png'],
  ['powell', 'Powell_1', 'lfw/Powell_1.png'],
  ['powell', 'Powell_2', 'lfw/Powell_2.png'],
  ['powell', 'Powell_3', 'lfw/Powell_3.png'],
  ['sharon', 'Sharon_1', 'lfw/Sharon_1.png'],
  ['chavez', 'Chavez_1', 'lfw/Chavez_1.png'],
  ['hopper', 'hopper_a', 'grace_hopper_a.jpg'],
  ['hopper', 'hopper_b', 'grace_hopper_b.jpg'],
  ['astronaut', 'astronaut_png', 'astronaut.png'],
];
const SIDE = 480;

const cos = (a: Float32Array, b: Float32Array) => a.reduce((s, v, i) => s + v * b[i]!, 0);
const q = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(p * xs.length))]!;

async function main(): Promise<void> {
  const engine = await FaceEngine.load(path.join(PROJECT_ROOT, 'var/models'));
  const random = rng(7);
  const grids: { person: string; capture: string; k: number; grid: Float32Array; embedding: Float32Array }[] = [];
  // Each capture's unlit frame's embedding: the pose frames' reference a light frame is judged against.
  const references: { person: string; capture: string; embedding: Float32Array }[] = [];
  for (const [person, capture, file] of SOURCES) {
    const jpeg = await sharp(readFileSync(path.join(FACES, file)))
      .jpeg({ quality: 92 })
      .toBuffer();
    const found = await engine.liveness(jpeg, 'largest', { antiSpoof: false, quality: false });
    const img = await decodeRgb(jpeg);
    references.push({ person, capture, embedding: Float32Array.from((await engine.embed(jpeg, found.face.landmarks5)).embedding) });
    for (const k of [0.2, 0.5]) {
      for (const colour of LIGHT_COLOURS) {
        const lit = await encodeJpeg(addNoise(relight(img, found.face.box, colour, { k }), 2, random), 90);
        const small = await sharp(lit).resize(SIDE, SIDE, { fit: 'inside', withoutEnlargement: true }).jpeg({ quality: 90 }).toBuffer();
        const r = await engine.liveness(small, 'largest', { antiSpoof: false, quality: false });
        const embedding = Float32Array.from((await engine.embed(small, r.face.landmarks5)).embedding);
        grids.push({ person, capture, k, grid: faceGrid(await decodePixels(small), r.face.landmarks5 as [number, number][]), embedding });
      }
    }
  }
  const table = (title: string, of: (g: (typeof grids)[number]) => Float32Array) => {
    const same: number[] = [];
    const sameDefault: number[] = [];
    const samePersonOtherPhoto: number[] = [];
    const different: number[] = [];
    for (let i = 0; i < grids.length; i++)
      for (let j = i + 1; j < grids.length; j++) {
        const a = grids[i]!,
          b = grids[j]!;
        const c = cos(of(a), of(b));
        if (a.capture === b.capture) {
          same.push(c);
          if (a.k === 0.2 && b.k === 0.2) sameDefault.push(c);
        } else if (a.person === b.person) samePersonOtherPhoto.push(c);
        else different.push(c);
      }
    const row = (name: string, xs: number[]) =>
      `| ${name} | ${xs.length} | ${Math.min(...xs).toFixed(3)} | ${q(xs, 0.01).toFixed(3)} | ${q(xs, 0.5).toFixed(3)} | ${q(xs, 0.99).toFixed(3)} | ${Math.max(...xs).toFixed(3)} |`;
    console.log(`${title} of two light frames (${SIDE} px, 7 colours × k 0.2 and 0.5):`);
    console.log('| pairs | n | min | 1 % | median | 99 % | max |');
    console.log('|---|---|---|---|---|---|---|');
    console.log(row('one capture, two colours (and moving a little)', same));
    console.log(row('… both at the default reflection (k 0.2)', sameDefault));
    console.log(row('one person, another capture (another photo, or the photo a fixture was made from)', samePersonOtherPhoto));
    console.log(row('two people', different));
  };
  const toReference = { same: [] as number[], samePersonOtherPhoto: [] as number[], different: [] as number[] };
  for (const g of grids)
    for (const r of references)
      (r.capture === g.capture ? toReference.same : r.person === g.person ? toReference.samePersonOtherPhoto : toReference.different).push(
        cos(g.embedding, r.embedding),
      );
  table('Face-grid cosine', (g) => g.grid);
  table('Face-embedding cosine', (g) => g.embedding);
  console.log('Face-embedding cosine of a light frame with an unlit frame (the reference the service judges it against):');
  console.log('| pairs | n | min | 1 % | median | 99 % | max |');
  console.log('|---|---|---|---|---|---|---|');
  const row = (name: string, xs: number[]) =>
    `| ${name} | ${xs.length} | ${Math.min(...xs).toFixed(3)} | ${q(xs, 0.01).toFixed(3)} | ${q(xs, 0.5).toFixed(3)} | ${q(xs, 0.99).toFixed(3)} | ${Math.max(...xs).toFixed(3)} |`;
  console.log(row('the same capture unlit', toReference.same));
  console.log(row('one person, another capture', toReference.samePersonOtherPhoto));
  console.log(row('two people', toReference.different));
  await engine.release();
}

await main();
