/**
 * The real face pipeline on real photos with the real ONNX models (var/models, or FACE_MODELS_DIR;
 * fetched by `npx tsx scripts/fetch-models.ts`). Photos and their provenance: test/fixtures/faces.
 * Thresholds: platform/thresholds.ts (calibrated by scripts/calibrate.ts, docs/face-engine.md).
 */
import test from 'ava';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import * as ort from 'onnxruntime-node';
import sharp from 'sharp';
import { FaceEngine, chooseFace, FACE_SELECTION, type EmbedResult } from '../features/face/worker/pipeline/engine.js';
import { cosine } from '../platform/face/embeddings.js';
import {
  normaliseUpload,
  normaliseUploadRgb,
  uploadForJob,
  decodeRgb,
  MAX_NORMALISED_SIDE,
  OVER_PIXEL_LIMIT_MESSAGE,
  UNDECODABLE_IMAGE_MESSAGE,
} from '../platform/face/image.js';
import { FaceError, type FaceErrorCode } from '../platform/face/face-error.js';
import type { LivenessResult } from '../platform/face/liveness.js';
import { generatePriors, PRIOR_COUNT, type Detection } from '../features/face/worker/pipeline/detect.js';
import { estimateSimilarity, applyAffine, ARCFACE_TEMPLATE_112, type Point } from '../features/face/worker/pipeline/align.js';
import { CALIBRATED_THRESHOLDS } from '../platform/thresholds.js';
import { FIXTURE_PHOTOS, FIXTURES_DIR, genuinePairs } from './fixtures/faces/labels.js';
import { rng } from './helpers/vectors.js';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const MODELS = path.resolve(ROOT, process.env.FACE_MODELS_DIR ?? 'var/models');
const { match: MATCH, highConfidence: HIGH, liveness: LIVE } = CALIBRATED_THRESHOLDS;

const fixture = (file: string) => readFileSync(path.join(FIXTURES_DIR, file));

let engine: FaceEngine;

test.before(async () => {
  engine = await FaceEngine.load(MODELS);
});

test.after.always(async () => {
  await engine?.release();
});

interface Processed {
  jpeg: Buffer;
  width: number;
  height: number;
  live: LivenessResult;
  emb: EmbedResult;
}

/** Normalise, liveness stage ('largest'), embed stage; once per photo and file. */
const cache = new Map<string, Promise<Processed>>();
function processed(file: string): Promise<Processed> {
  let p = cache.get(file);
  if (!p) {
    p = (async () => {
      const n = await normaliseUpload(fixture(file));
      const live = await engine.liveness(n.jpeg, 'largest');
      const emb = await engine.embed(n.jpeg, live.face.landmarks5);
      return { ...n, live, emb };
    })();
    cache.set(file, p);
  }
  return p;
}

async function similarity(a: string, b: string): Promise<number> {
  const [x, y] = await Promise.all([processed(a), processed(b)]);
  return cosine(x.emb.embedding, y.emb.embedding);
}

function isFaceErrorWith(code: FaceErrorCode) {
  return (err: unknown) => err instanceof FaceError && err.code === code;
}

async function rejectsWith(t: import('ava').ExecutionContext, promise: Promise<unknown>, code: FaceErrorCode): Promise<FaceError> {
  const err = await t.throwsAsync(promise, { instanceOf: FaceError });
  t.is(err?.code, code, err?.message);
  return err as FaceError;
}

// ------------------------------------------------------------------------------------------
// Matching
// ------------------------------------------------------------------------------------------

// Different photographs of one person (the two crops of one portrait are tested below, stricter).
const GENUINE = genuinePairs();

test('the labels give the genuine pairs of Bush and Powell', (t) => {
  t.is(GENUINE.length, 6);
});

for (const [a, b] of GENUINE) {
  test(`same person matches: ${a} ~ ${b}`, async (t) => {
    const s = await similarity(a, b);
    t.true(s >= MATCH, `cosine ${s.toFixed(3)} < match threshold ${MATCH}`);
  });
}

test('two crops of one Grace Hopper portrait match with high confidence', async (t) => {
  const s = await similarity('grace_hopper_a.jpg', 'grace_hopper_b.jpg');
  t.true(s >= HIGH, `cosine ${s.toFixed(3)} < high-confidence threshold ${HIGH}`);
});

// Different people: every pair across identities (the group photos' largest faces are three women
// unrelated to the other photos; pairs of faces from two different group photos are not labelled).
const IDENTITIES: Record<string, string> = Object.fromEntries(FIXTURE_PHOTOS.filter((p) => p.identity || p.group).map((p) => [p.file, p.identity ?? 'group']));

test('different people stay below the match threshold (all labelled cross-identity pairs)', async (t) => {
  const files = Object.keys(IDENTITIES);
  let pairs = 0;
  let worst = { s: -1, a: '', b: '' };
  for (let i = 0; i < files.length; i++) {
    for (let j = i + 1; j < files.length; j++) {
      const a = files[i]!,
        b = files[j]!;
      if (IDENTITIES[a] === IDENTITIES[b]) continue;
      const s = await similarity(a, b);
      pairs++;
      if (s > worst.s) worst = { s, a, b };
    }
  }
  t.true(pairs >= 70);
  t.true(worst.s < MATCH, `${worst.a} ~ ${worst.b}: cosine ${worst.s.toFixed(3)} >= match threshold ${MATCH}`);
});

test('embeddings are 512-d, finite and of unit norm', async (t) => {
  for (const file of ['lfw/Bush_1.png', 'astronaut.png', 'group/sample2.jpg']) {
    const { emb } = await processed(file);
    t.is(emb.embedding.length, 512);
    t.true(emb.embedding.every(Number.isFinite));
    const norm = Math.sqrt(emb.embedding.reduce((a, v) => a + v * v, 0));
    t.true(Math.abs(norm - 1) < 1e-5, `norm ${norm}`);
  }
});

test('an EXIF-rotated copy (orientation 6) is turned upright and still matches the original', async (t) => {
  const original = await processed('grace_hopper_b.jpg'); // 512x600: the rotation swaps the sides
  // Orientation 6 = "rotate 90° clockwise to display": store the pixels rotated 90° counter-clockwise.
  const rotatedPixels = await sharp(fixture('grace_hopper_b.jpg')).rotate(270).toBuffer();
  const withExif = await sharp(rotatedPixels).withMetadata({ orientation: 6 }).jpeg({ quality: 92 }).toBuffer();
  t.is((await sharp(withExif).metadata()).orientation, 6);
  t.is((await sharp(withExif).metadata()).width, 600);

  const n = await normaliseUpload(withExif);
  t.deepEqual([n.width, n.height], [original.width, original.height]);
  t.is((await sharp(n.jpeg).metadata()).orientation, undefined, 'the normalised JPEG carries no orientation tag');
  const live = await engine.liveness(n.jpeg, 'single');
  const emb = await engine.embed(n.jpeg, live.face.landmarks5);
  const s = cosine(emb.embedding, original.emb.embedding);
  t.true(s >= 0.95 && s >= MATCH, `cosine ${s.toFixed(3)}`);

  // Control: the same sideways pixels without the tag do not give the same face.
  const noExif = await normaliseUpload(await sharp(rotatedPixels).jpeg({ quality: 92 }).toBuffer());
  try {
    const l2 = await engine.liveness(noExif.jpeg, 'single');
    const e2 = await engine.embed(noExif.jpeg, l2.face.landmarks5);
    t.true(cosine(e2.embedding, original.emb.embedding) < MATCH);
  } catch (err) {
    t.true(isFaceErrorWith('no_face')(err), String(err));
  }
});

test('a small JPEG upload is handed on as it came only where decoding it gives the normalised pixels', async (t) => {
  const small = await sharp(fixture('grace_hopper_b.jpg')).resize(400, 400, { fit: 'inside' }).jpeg({ quality: 92 }).toBuffer();
  // Sideways, with an orientation tag: the face process's decode turns it upright as the API's does.
  const sideways = await sharp(await sharp(small).rotate(270).toBuffer())
    .withMetadata({ orientation: 6 })
    .jpeg({ quality: 92 })
    .toBuffer();
  for (const [name, upload] of [
    ['plain', small],
    ['orientation 6', sideways],
  ] as const) {
    const n = await normaliseUploadRgb(upload, { maxSide: 480 });
    t.is(n.jpeg, upload, `${name}: the upload's own bytes`);
    const again = await decodeRgb(n.jpeg!);
    t.deepEqual([again.width, again.height], [n.width, n.height], name);
    t.true(Buffer.from(again.data).equals(Buffer.from(n.data)), `${name}: the same pixels`);
  }
  // Resized (over the side) or not a JPEG: no upload bytes, the caller encodes the pixels.
  t.is((await normaliseUploadRgb(small, { maxSide: 320 })).jpeg, undefined);
  t.is((await normaliseUploadRgb(await sharp(small).png().toBuffer(), { maxSide: 480 })).jpeg, undefined);
});

// ------------------------------------------------------------------------------------------
// Face outcomes
// ------------------------------------------------------------------------------------------

test('a selfie or a probe (never stored) goes to its job as it came when it is a JPEG within the normalised size: upright size from its header, judged on its own pixels', async (t) => {
  const small = await sharp(fixture('grace_hopper_b.jpg')).resize(400, 300, { fit: 'fill' }).jpeg({ quality: 92 }).toBuffer();
  const sideways = await sharp(await sharp(small).rotate(270).toBuffer())
    .withMetadata({ orientation: 6 })
    .jpeg({ quality: 92 })
    .toBuffer();
  const plain = await uploadForJob(small);
  t.is(plain.jpeg, small, "the upload's own bytes");
  t.like(plain, { width: 400, height: 300, asItCame: true });
  const turned = await uploadForJob(sideways);
  t.is(turned.jpeg, sideways);
  t.like(turned, { width: 400, height: 300, asItCame: true }, 'the upright size, from the header and its orientation');
  // The face process decodes it to the normalisation's pixels (the same rotation, flattening and colour space).
  for (const [name, upload] of [
    ['plain', small],
    ['orientation 6', sideways],
  ] as const) {
    const once = await decodeRgb(upload);
    const normalised = await normaliseUploadRgb(upload);
    t.true(Buffer.from(once.data).equals(Buffer.from(normalised.data)), `${name}: the same pixels`);
  }
  // Anything else is normalised: metadata-free, re-encoded.
  const large = await sharp(fixture('grace_hopper_b.jpg')).resize(1600, 1200, { fit: 'fill' }).jpeg().toBuffer();
  const png = await sharp(small).png().toBuffer();
  for (const other of [large, png]) {
    const n = await uploadForJob(other);
    t.is(n.asItCame, undefined);
    t.not(n.jpeg, other);
    t.true(Math.max(n.width, n.height) <= MAX_NORMALISED_SIDE);
  }
  // The header's checks still apply before anything is handed on.
  await t.throwsAsync(uploadForJob(small, { maxPixels: 1000 }));
  await t.throwsAsync(uploadForJob(Buffer.from('GIF89a not an image')), { message: /JPEG, PNG or WebP/ });
});

test('the fruit photo gives no_face in both modes', async (t) => {
  const { jpeg } = await normaliseUpload(fixture('no_face_fruits.jpg'));
  t.is((await rejectsWith(t, engine.liveness(jpeg, 'single'), 'no_face')).faceCount, 0);
  await rejectsWith(t, engine.liveness(jpeg, 'largest'), 'no_face');
});

for (const file of ['group/sample1.jpg', 'group/sample2.jpg', 'group/sample3.jpg']) {
  test(`${file}: multiple_faces in mode 'single', the largest face in mode 'largest'`, async (t) => {
    const { jpeg, live } = await processed(file);
    const err = await rejectsWith(t, engine.liveness(jpeg, 'single'), 'multiple_faces');
    t.true(live.faceCount >= 3, `faceCount ${live.faceCount}`);
    t.is(err.faceCount, live.faceCount);
    const all = await engine.analyse(jpeg);
    t.is(all.faces.length, live.faceCount);
    const tallest = Math.max(...all.faces.map((f) => f.box[3]));
    t.is(live.face.box[3], tallest);
  });
}

test("single-face photos pass mode 'single' with one face", async (t) => {
  for (const file of ['lfw/Bush_1.png', 'lfw/Sharon_1.png', 'grace_hopper_a.jpg', 'astronaut.png']) {
    const { jpeg } = await processed(file);
    const r = await engine.liveness(jpeg, 'single');
    t.is(r.faceCount, 1, file);
    t.true(r.face.detScore >= 0.9, file);
    t.is(r.face.landmarks5.length, 5);
  }
});

test("a light frame's stage (no anti-spoof model, no quality) finds the same face and aligns the same embedding", async (t) => {
  for (const file of ['lfw/Bush_1.png', 'astronaut.png']) {
    const { jpeg, live, emb } = await processed(file);
    const full = await engine.liveness(jpeg, 'largest', { align: true });
    const light = await engine.liveness(jpeg, 'largest', { align: true, antiSpoof: false, quality: false });
    t.deepEqual(light.face, live.face, file);
    t.is(light.livenessScore, 0, `${file}: unscored, never a pass`);
    t.true(full.livenessScore > 0, file);
    t.is(light.quality, undefined, file);
    const e = await engine.embedAligned(light.aligned!);
    const cosine = e.embedding.reduce((a, v, i) => a + v * emb.embedding[i]!, 0);
    t.true(cosine > 0.99, `${file}: cosine ${cosine}`);
  }
});

test('close-ups: every LFW tile (face filling the frame) is found', async (t) => {
  for (const file of Object.keys(IDENTITIES).filter((f) => f.startsWith('lfw/'))) {
    const { live, width, height } = await processed(file);
    const [, , w, h] = live.face.box;
    t.true(h >= 0.7 * height && w >= 0.7 * width, `${file}: box ${live.face.box.join(',')} in ${width}x${height}`);
    // eyes above the nose above the mouth, left eye left of the right eye
    const [le, re, nose, lm, rm] = live.face.landmarks5 as Point[];
    t.true(le![0] < re![0] && lm![0] < rm![0], file);
    t.true(Math.max(le![1], re![1]) < nose![1] && nose![1] < Math.min(lm![1], rm![1]), file);
  }
});

test("chooseFace: a small or uncertain second face does not block mode 'single'", (t) => {
  const face = (x: number, h: number, score: number): Detection => ({ x1: x, y1: 0, x2: x + h * 0.8, y2: h, score, pass: 0 });
  const big = face(0, 300, 0.99);
  t.is(chooseFace([face(500, 100, 0.99), big], 'single'), big); // 33% of the height
  t.is(chooseFace([big, face(500, 250, 0.85)], 'single'), big); // not confident enough
  t.throws(() => chooseFace([big, face(500, 300 * FACE_SELECTION.secondFaceMinSizeRatio, 0.95)], 'single'), { instanceOf: FaceError });
  t.is(chooseFace([face(500, 250, 0.99), big], 'largest'), big);
  t.throws(() => chooseFace([], 'largest'), { instanceOf: FaceError, message: /No face/ });
});

// ------------------------------------------------------------------------------------------
// Liveness
// ------------------------------------------------------------------------------------------

test('live photos pass the liveness threshold', async (t) => {
  for (const file of ['lfw/Bush_1.png', 'lfw/Powell_1.png', 'grace_hopper_a.jpg', 'grace_hopper_b.jpg', 'astronaut.png', 'group/sample2.jpg']) {
    const { live } = await processed(file);
    t.true(live.livenessScore >= LIVE, `${file}: ${live.livenessScore} < ${LIVE}`);
  }
});

// No real spoof photo is available. This is a synthetic presentation attack made from
// grace_hopper_a.jpg by scripts/calibrate.ts (SYNTHETIC_ATTACKS['held-print']: the photo printed small
// with a paper border, held in front of a dark wall). The model flags this one; it does NOT flag every
// synthetic attack (see docs/face-engine.md): this test pins the class order and the 2.7x crop, it does
// not show that presentation attacks in general are caught.
test('a synthetic held-up print of a live photo fails liveness (synthetic, see comment)', async (t) => {
  const { jpeg } = await normaliseUpload(fixture('synthetic/grace_hopper_a_held_print.jpg'));
  const r = await engine.liveness(jpeg, 'single');
  t.true(r.livenessScore < LIVE, `liveness ${r.livenessScore}`);
  t.true((await processed('grace_hopper_a.jpg')).live.livenessScore >= LIVE);
});

test('each stage reports its own wall-clock milliseconds', async (t) => {
  const { live, emb } = await processed('astronaut.png');
  for (const ms of [live.ms, emb.ms]) t.true(Number.isFinite(ms) && ms > 0 && ms < 10_000, String(ms));
});

// ------------------------------------------------------------------------------------------
// Decoding
// ------------------------------------------------------------------------------------------

function crc32(buf: Uint8Array): number {
  let c = ~0;
  for (const byte of buf) {
    c ^= byte;
    for (let k = 0; k < 8; k++) c = (c >>> 1) ^ (0xedb88320 & -(c & 1));
  }
  return ~c >>> 0;
}

test('corrupt input gives invalid_image: random bytes, a truncated JPEG, a text file, empty', async (t) => {
  const rand = rng(42);
  const random = Buffer.from(Array.from({ length: 4096 }, () => Math.floor(rand() * 256)));
  const jpeg = fixture('grace_hopper_a.jpg');
  const truncated = jpeg.subarray(0, Math.floor(jpeg.length / 2));
  const text = Buffer.from('name,nin\nAda,12345678901\n', 'utf8');
  const jpegMagicThenGarbage = Buffer.concat([Buffer.from([0xff, 0xd8, 0xff, 0xe0]), random]);
  for (const [name, buf] of Object.entries({ random, truncated, text, jpegMagicThenGarbage, empty: Buffer.alloc(0) })) {
    const err = await t.throwsAsync(normaliseUpload(buf), { instanceOf: FaceError }, name);
    t.is(err?.code, 'invalid_image', name);
    // A fixed message: never the image library's own text (its name, version, the file's inner workings).
    t.notRegex(err?.message ?? '', /vips|sharp|premature|marker|huffman|input buffer|corrupt/i, name);
  }
  for (const buf of [truncated, jpegMagicThenGarbage]) t.is((await t.throwsAsync(normaliseUpload(buf)))?.message, UNDECODABLE_IMAGE_MESSAGE);
  // the engine's own decoding refuses them the same way
  await rejectsWith(t, engine.liveness(random, 'single'), 'invalid_image');
  await rejectsWith(t, engine.liveness(truncated, 'largest'), 'invalid_image');
  await rejectsWith(
    t,
    engine.embed(text, [
      [1, 1],
      [2, 1],
      [1.5, 2],
      [1, 3],
      [2, 3],
    ]),
    'invalid_image',
  );
});

test('formats other than JPEG, PNG and WebP are refused; WebP is accepted', async (t) => {
  const gif = await sharp(fixture('astronaut.png')).resize(64).gif().toBuffer();
  const err = await rejectsWith(t, normaliseUpload(gif), 'invalid_image');
  t.regex(err.message, /JPEG, PNG or WebP/);
  const webp = await sharp(fixture('astronaut.png')).webp({ quality: 90 }).toBuffer();
  const n = await normaliseUpload(webp);
  t.deepEqual([n.width, n.height], [512, 512]);
});

test('an image over the pixel limit is refused before decoding', async (t) => {
  // A valid 1x1 PNG whose header claims 8000x6000 (48 MP > 40 MP).
  const png = Buffer.from(
    await sharp({ create: { width: 1, height: 1, channels: 3, background: '#808080' } })
      .png()
      .toBuffer(),
  );
  t.is(png.toString('latin1', 12, 16), 'IHDR');
  png.writeUInt32BE(8000, 16);
  png.writeUInt32BE(6000, 20);
  png.writeUInt32BE(crc32(png.subarray(12, 29)), 29);
  const err = await rejectsWith(t, normaliseUpload(png), 'invalid_image');
  t.is(err.message, OVER_PIXEL_LIMIT_MESSAGE);
});

test('normalisation bounds the size, keeps small images, writes a metadata-free JPEG', async (t) => {
  const big = await normaliseUpload(fixture('group/sample1.jpg')); // 1920x1280
  t.deepEqual([big.width, big.height], [MAX_NORMALISED_SIDE, 853]);
  const small = await normaliseUpload(fixture('lfw/Bush_1.png')); // 126x172
  t.deepEqual([small.width, small.height], [126, 172]);
  for (const n of [big, small]) {
    t.deepEqual([...n.jpeg.subarray(0, 3)], [0xff, 0xd8, 0xff]);
    const meta = await sharp(n.jpeg).metadata();
    t.is(meta.format, 'jpeg');
    t.is(meta.exif, undefined);
    const rgb = await decodeRgb(n.jpeg);
    t.is(rgb.data.length, n.width * n.height * 3);
  }
});

// ------------------------------------------------------------------------------------------
// Building blocks
// ------------------------------------------------------------------------------------------

test("the detector's boxes are already decoded onto its 4420 priors", async (t) => {
  const session = await ort.InferenceSession.create(path.join(MODELS, 'fr_detect.onnx'), { graphOptimizationLevel: 'extended' });
  try {
    const priors = generatePriors();
    t.is(priors.length, PRIOR_COUNT * 4);
    const out = await session.run({ input: new ort.Tensor('float32', new Float32Array(3 * 240 * 320), [1, 3, 240, 320]) });
    const b = out['boxes']!.data as Float32Array;
    t.is(b.length, PRIOR_COUNT * 4);
    let worst = 0;
    for (let i = 0; i < PRIOR_COUNT; i++) {
      const cx = (b[4 * i]! + b[4 * i + 2]!) / 2,
        cy = (b[4 * i + 1]! + b[4 * i + 3]!) / 2;
      worst = Math.max(worst, Math.abs(cx - priors[4 * i]!) / priors[4 * i + 2]!, Math.abs(cy - priors[4 * i + 1]!) / priors[4 * i + 3]!);
    }
    // corner-form boxes whose centres sit within a fraction of a prior size of their prior
    t.true(worst < 0.5, `max centre offset ${worst.toFixed(3)} prior sizes`);
  } finally {
    await session.release();
  }
});

test('the similarity estimate recovers a known rotation, scale and shift', (t) => {
  const angle = 0.3,
    scale = 2.5,
    tx = 40,
    ty = -12;
  const src = ARCFACE_TEMPLATE_112.map(([x, y]): Point => [x, y]);
  const dst = src.map(([x, y]): Point => [scale * (Math.cos(angle) * x - Math.sin(angle) * y) + tx, scale * (Math.sin(angle) * x + Math.cos(angle) * y) + ty]);
  const m = estimateSimilarity(src, dst);
  for (let i = 0; i < 5; i++) {
    const p = applyAffine(m, src[i]!);
    t.true(Math.hypot(p[0] - dst[i]![0], p[1] - dst[i]![1]) < 1e-9);
  }
  t.throws(
    () =>
      estimateSimilarity(
        [
          [1, 1],
          [1, 1],
        ],
        [
          [0, 0],
          [1, 1],
        ],
      ),
    { instanceOf: RangeError },
  );
});

test('cosine: bounds and guards', (t) => {
  t.is(cosine([1, 2, 3], [2, 4, 6]), 1);
  t.is(cosine([1, 0], [-1, 0]), -1);
  t.is(cosine([1, 0], [0, 5]), 0);
  t.throws(() => cosine([1, 2], [1, 2, 3]), { instanceOf: RangeError });
  t.throws(() => cosine([0, 0], [1, 2]), { instanceOf: RangeError });
});

test('embed refuses malformed landmarks', async (t) => {
  const { jpeg } = await processed('astronaut.png');
  await t.throwsAsync(engine.embed(jpeg, [[1, 2]]), { instanceOf: TypeError });
  await t.throwsAsync(
    engine.embed(jpeg, [
      [1, 2],
      [3, 4],
      [5, 6],
      [7, 8],
      [9, Number.NaN],
    ]),
    { instanceOf: TypeError },
  );
  await t.throwsAsync(
    engine.embed(jpeg, [
      [5, 5],
      [5, 5],
      [5, 5],
      [5, 5],
      [5, 5],
    ]),
    { instanceOf: RangeError },
  );
});
