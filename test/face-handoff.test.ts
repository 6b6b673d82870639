/**
 * The face path's hand-offs, read from Redis itself: a job payload and the sealed value beside it, as a
 * Redis dump would hold them, do not open together (the payload carries a salt, not a key); the key
 * ring of the processes opens them with that salt, and nothing opens them without it. The same code
 * serves a real face request end to end, and a worker whose ring lacks the API's key cannot open them.
 */
import test from 'ava';
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { KeyRing } from '../platform/keys/key-ring.js';
import { AppError } from '../platform/errors.js';
import { handoffKey } from '../platform/face-path/handoff.js';
import { HandoffSealer, newHandoffSalt } from '../platform/face-path/sealing.js';
import { bullPrefix } from '../platform/jobs/contract.js';
import { createRedis } from '../platform/redis/redis.js';
import { ROOT, useHarness } from './helpers/harness.js';

const FACES = path.join(ROOT, 'test/fixtures/faces');
const photo = (f: string) => readFileSync(path.join(FACES, f));
const K1 = randomBytes(32).toString('base64');
const K2 = randomBytes(32).toString('base64');
const ringOf = (keys: string, active: string) => KeyRing.from({ biometricKeys: keys, biometricActiveKeyId: active });

const h = useHarness(test, { env: { BIOMETRIC_KEYS: `k1:${K1}`, BIOMETRIC_ACTIVE_KEY_ID: 'k1' } });

/**
 * Whether the payload's value alone opens a sealed value, the way hand-offs were opened before: as an
 * AES-256-GCM key (base64 or raw), over `iv ‖ tag ‖ ciphertext` at the start of the value or after its
 * key-id header.
 */
function opensWithPayloadValue(sealed: Buffer, payloadValue: string): boolean {
  const offsets = [0, 2 + sealed[1]!];
  const keys = [Buffer.from(payloadValue, 'base64'), Buffer.from(payloadValue, 'utf8')].filter((k) => k.length === 32);
  for (const key of keys)
    for (const at of offsets) {
      try {
        const d = createDecipheriv('aes-256-gcm', key, sealed.subarray(at, at + 12));
        d.setAuthTag(sealed.subarray(at + 12, at + 28));
        Buffer.concat([d.update(sealed.subarray(at + 28)), d.final()]);
        return true;
      } catch {
        // does not open that way
      }
    }
  return false;
}

test.serial('a Redis dump of a liveness job and its image: the payload value does not open the image; the key ring with it does', async (t) => {
  const redis = createRedis(h.config.redis.url);
  t.teardown(() => redis.disconnect());
  // No face worker yet: the job and its image wait in Redis.
  const pending = h.deps.face.analyseCapture(photo('lfw/Bush_1.png'), 'single', Date.now() + 1500);
  pending.catch(() => {});
  let jobKey: string | undefined;
  for (let i = 0; i < 50 && !jobKey; i++) {
    const ids = await redis.lrange(`${bullPrefix(h.config.redis.prefix)}:liveness:wait`, 0, -1);
    if (ids[0]) jobKey = `${bullPrefix(h.config.redis.prefix)}:liveness:${ids[0]}`;
    else await new Promise((r) => setTimeout(r, 20));
  }
  if (!jobKey) return t.fail('the liveness job never appeared');
  // What Redis holds: the job hash (its payload, JSON) and the sealed image beside it.
  const payload = JSON.parse((await redis.hget(jobKey, 'data'))!).payload as Record<string, unknown>;
  t.deepEqual(Object.keys(payload).sort(), ['handOffMinLiveness', 'imageRef', 'mode', 'resultSalt']);
  const salt = payload.resultSalt as string;
  const sealed = await redis.getBuffer(handoffKey(h.config.redis.prefix, 'image', payload.imageRef as string));
  if (!sealed) return t.fail('no sealed image beside the job');
  t.false(sealed.subarray(0, 3).equals(Buffer.from([0xff, 0xd8, 0xff])), 'not a JPEG in clear');

  t.false(opensWithPayloadValue(sealed, salt), 'the payload value alone does not open it');
  const processes = new HandoffSealer(ringOf(`k1:${K1}`, 'k1'));
  const image = processes.open(sealed, salt);
  t.true(image.subarray(0, 3).equals(Buffer.from([0xff, 0xd8, 0xff])), 'the ring with the salt opens it to the JPEG');
  t.throws(() => processes.open(sealed, newHandoffSalt()), undefined, 'the ring without its salt opens nothing');
  t.throws(() => new HandoffSealer(ringOf(`k2:${K2}`, 'k2')).open(sealed, salt), undefined, 'the salt under another ring opens nothing');
  // The opened check is not blind: the "payload value alone" check opens what is sealed that way.
  const oldWay = (() => {
    const key = Buffer.from(salt, 'base64');
    const iv = randomBytes(12);
    const c = createCipheriv('aes-256-gcm', key, iv);
    const data = Buffer.concat([c.update(image), c.final()]);
    return Buffer.concat([iv, c.getAuthTag(), data]);
  })();
  t.true(opensWithPayloadValue(oldWay, salt));

  const err = await t.throwsAsync(pending);
  t.is((err as AppError).code, 'face_engine_unavailable');
});

test.serial('with the key ring in the workers, a real face request runs end to end and leaves no hand-off in Redis', async (t) => {
  const redis = createRedis(h.config.redis.url);
  t.teardown(() => redis.disconnect());
  const worker = await h.startFaceWorker();
  try {
    const r = await h.deps.face.verifyAgainstPhoto(photo('lfw/Bush_2.png'), photo('lfw/Bush_1.png'));
    t.is(r.outcome, 'match');
    t.true((r.score ?? 0) > 0.5, `score ${r.score}`);
    t.is(r.embedding?.embedding.length, 512);
    t.deepEqual(await redis.keys(`${h.config.redis.prefix}:face:*`), [], 'every hand-off taken');
  } finally {
    await worker.close();
  }
});

test.serial('a face worker whose key ring lacks the key the API sealed with cannot open the image: the request answers 503 at once', async (t) => {
  const worker = await h.startFaceWorker({ BIOMETRIC_KEYS: `k2:${K2}`, BIOMETRIC_ACTIVE_KEY_ID: 'k2' });
  try {
    const t0 = Date.now();
    const err = await t.throwsAsync(h.deps.face.analyseCapture(photo('lfw/Bush_1.png'), 'single', Date.now() + 10_000));
    t.is((err as AppError).code, 'face_engine_unavailable');
    t.true(Date.now() - t0 < 8000, 'answered by the failed job, not the deadline');
  } finally {
    await worker.close();
  }
});

test('a value sealed before a rotation opens after it: the value names the ring key it was derived from', (t) => {
  const before = new HandoffSealer(ringOf(`k1:${K1},k2:${K2}`, 'k1'));
  const after = new HandoffSealer(ringOf(`k1:${K1},k2:${K2}`, 'k2'));
  const salt = newHandoffSalt();
  const bytes = randomBytes(100);
  t.deepEqual(after.open(before.seal(bytes, salt), salt), bytes);
  t.deepEqual(before.open(after.seal(bytes, salt), salt), bytes);
  const raw = Array.from({ length: 512 }, (_, i) => Math.sin(i));
  const embedding = Array.from(Float32Array.from(raw.map((x) => x / Math.hypot(...raw))));
  const sealed = before.sealEmbedding(embedding, salt);
  t.is(KeyRing.keyIdOf(Buffer.from(sealed.sealed, 'base64')), 'k1');
  t.deepEqual(after.openEmbedding(sealed, salt), embedding);
  // Once the key is dropped from the ring, what it sealed no longer opens.
  t.throws(() => new HandoffSealer(ringOf(`k2:${K2}`, 'k2')).open(before.seal(bytes, salt), salt), { message: /no key k1/ });
});
