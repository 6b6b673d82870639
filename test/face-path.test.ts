/**
 * The face path's shortcuts do what they claim, on the real models and fixture photos:
 * the detector's padded pass is skipped only when the first pass found a face well inside the frame,
 * and the embed stage works from the face the liveness stage aligned (and from nothing else), handed
 * over once through Redis.
 * That they change no outcome is test/face/face-outcomes.test.ts.
 */
import test from 'ava';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import type * as ort from 'onnxruntime-node';
import { randomBytes } from 'node:crypto';
import { KeyRing } from '../platform/keys/key-ring.js';
import { HandoffSealer, newHandoffSalt } from '../platform/face-path/sealing.js';
import { RedisFaceHandoff } from '../platform/face-path/handoff.js';
import { createRedis } from '../platform/redis/redis.js';
import { TEST_REDIS_URL, testRedisPrefix } from './helpers/db.js';
import { normaliseUpload, decodeRgb } from '../platform/face/image.js';
import { detectFaces, DEFAULT_DETECT_OPTIONS } from '../features/face/worker/pipeline/detect.js';
import { decodeAlignedFace, encodeAlignedFace } from '../features/face/worker/pipeline/embed.js';
import { FaceEngine } from '../features/face/worker/pipeline/engine.js';
import { embedHandler, livenessHandler } from '../features/face/worker/worker.js';
import { ROOT } from './helpers/harness.js';

const photo = (file: string) => readFileSync(path.join(ROOT, 'test/fixtures/faces', file));
let engine: FaceEngine;
const redisPrefix = testRedisPrefix();
const redis = createRedis(TEST_REDIS_URL);
const sealer = new HandoffSealer(KeyRing.from({ biometricKeys: `k1:${randomBytes(32).toString('base64')}`, biometricActiveKeyId: 'k1' }));
const handoff = new RedisFaceHandoff(redis, redisPrefix, sealer);
/** The normalised image left for a liveness job, as the API leaves it (sealed under the job's salt). */
const imageRef = (jpeg: Buffer, salt: string, deadlineAt: number) => handoff.put('image', sealer.seal(jpeg, salt), deadlineAt);
test.before(async () => {
  engine = await FaceEngine.load(path.join(ROOT, 'var/models'));
});
test.after.always(async () => {
  await engine?.release();
  const keys = await redis.keys(`${redisPrefix}:*`);
  if (keys.length) await redis.del(...keys);
  redis.disconnect();
});

/** The detector session of the engine, wrapped to count its runs. */
function countingDetector(): { session: ort.InferenceSession; runs: () => number } {
  const real = (engine as unknown as { sessions: { detect: ort.InferenceSession } }).sessions.detect;
  let n = 0;
  const session = { run: (...args: Parameters<ort.InferenceSession['run']>) => (n++, real.run(...args)) } as unknown as ort.InferenceSession;
  return { session, runs: () => n };
}

test('a portrait runs the detector once; close-ups, small faces and no face run the padded pass too', async (t) => {
  const cases: [string, number][] = [
    ['grace_hopper_a.jpg', 1],
    ['grace_hopper_b.jpg', 1],
    ['lfw/Bush_1.png', 2], // the face fills the frame: the padded pass is the safety net
    ['group/sample1.jpg', 2], // faces below a quarter of the frame height
    ['no_face_fruits.jpg', 2],
  ];
  for (const [file, expected] of cases) {
    const img = await decodeRgb((await normaliseUpload(photo(file))).jpeg);
    const { session, runs } = countingDetector();
    const skipped = await detectFaces(session, img);
    t.is(runs(), expected, file);
    // Skipping changes nothing the pipeline uses: the same faces as with every pass.
    const all = await detectFaces(countingDetector().session, img, { ...DEFAULT_DETECT_OPTIONS, skipPaddedWhenInside: null });
    t.is(skipped.length, all.length, `${file}: face count`);
    if (all.length) t.true(Math.abs(skipped[0]!.score - all[0]!.score) < 1e-3, `${file}: best face`);
  }
});

test('the aligned face survives its 16-bit encoding to within 1/512 of a grey level', (t) => {
  const rgb = Float32Array.from({ length: 112 * 112 * 3 }, (_, i) => (i * 37.123) % 255.99);
  const back = decodeAlignedFace(encodeAlignedFace(rgb));
  t.true(rgb.every((v, i) => Math.abs(v - back[i]!) <= 1 / 512 + 1e-6));
  t.throws(() => decodeAlignedFace(new Uint8Array(100)), { instanceOf: RangeError });
});

test('the embed job embeds the face the liveness job aligned, taken once from Redis; a wrong salt gives invalid_image, never an embedding', async (t) => {
  const jpeg = (await normaliseUpload(photo('lfw/Powell_1.png'))).jpeg;
  const key = newHandoffSalt();
  const deadlineAt = Date.now() + 10_000;
  const live = await livenessHandler(
    engine,
    handoff,
    { imageRef: await imageRef(jpeg, key, deadlineAt), mode: 'single', resultSalt: key, handOffMinLiveness: 0 },
    deadlineAt,
  );
  if (!live.ok || live.alignedFaceRef === null) return t.fail('no aligned face');
  // In Redis: sealed (no clear pixels), expiring with the request's deadline.
  const stored = await redis.getBuffer(`${redisPrefix}:face:aligned:${live.alignedFaceRef}`);
  t.truthy(stored);
  const ttl = await redis.pttl(`${redisPrefix}:face:aligned:${live.alignedFaceRef}`);
  t.true(ttl > 0 && ttl <= 10_000, `ttl ${ttl}`);
  const resultSalt = newHandoffSalt();
  const embedded = await embedHandler(engine, handoff, { alignedFaceRef: live.alignedFaceRef, alignedFaceSalt: key, resultSalt });
  if (!embedded.ok) return t.fail(embedded.code);
  const viaJobs = sealer.openEmbedding(embedded.sealedEmbedding, resultSalt);
  // The same as the engine's own embed from the image and the five points.
  const direct = await engine.embed(jpeg, live.face.landmarks5);
  const cos = viaJobs.reduce((s, v, i) => s + v * direct.embedding[i]!, 0);
  t.true(cos > 0.99999, `cosine ${cos}`);
  // Taken: gone from Redis, and a second embed of the same ref fails (an engine fault: 503), never a result.
  t.is(await redis.exists(`${redisPrefix}:face:aligned:${live.alignedFaceRef}`), 0);
  await t.throwsAsync(embedHandler(engine, handoff, { alignedFaceRef: live.alignedFaceRef, alignedFaceSalt: key, resultSalt }), { message: /gone/ });

  const again = await livenessHandler(
    engine,
    handoff,
    { imageRef: await imageRef(jpeg, key, deadlineAt), mode: 'single', resultSalt: key, handOffMinLiveness: 0 },
    deadlineAt,
  );
  if (!again.ok || again.alignedFaceRef === null) return t.fail('no aligned face');
  // Below the job's liveness bar nothing is handed on (nothing will embed it).
  const failing = await livenessHandler(
    engine,
    handoff,
    { imageRef: await imageRef(jpeg, key, deadlineAt), mode: 'single', resultSalt: key, handOffMinLiveness: 1.01 },
    deadlineAt,
  );
  t.like(failing, { ok: true, alignedFaceRef: null });
  const wrongSalt = await embedHandler(engine, handoff, { alignedFaceRef: again.alignedFaceRef, alignedFaceSalt: newHandoffSalt(), resultSalt });
  t.deepEqual({ ok: wrongSalt.ok, code: (wrongSalt as { code?: string }).code }, { ok: false, code: 'invalid_image' });
  const notAFaceRef = await handoff.put('aligned', sealer.seal(new Uint8Array(10), key), deadlineAt);
  const notAFace = await embedHandler(engine, handoff, { alignedFaceRef: notAFaceRef, alignedFaceSalt: key, resultSalt });
  t.false(notAFace.ok);
});
