/** The biometric key ring: sealing bound to its subject, rotation, and the settings production refuses. */
import test from 'ava';
import { randomBytes } from 'node:crypto';
import { BiometricKeyRing, KeyRingError, DEVELOPMENT_KEY_ID } from '../platform/keys/key-ring.js';
import { loadConfig, ConfigError } from '../platform/config.js';

const key = () => randomBytes(32).toString('base64');

test('a sealed template decrypts only with its subject as associated data, and is not the plaintext', (t) => {
  const ring = BiometricKeyRing.from({ biometricKeys: `k1:${key()}`, biometricActiveKeyId: 'k1' });
  const plain = Buffer.from(new Float32Array([0.5, -0.25, 0.125]).buffer);
  const blob = ring.encrypt(plain, 'user-a');
  t.false(blob.includes(plain));
  t.is(BiometricKeyRing.keyIdOf(blob), 'k1');
  t.deepEqual(ring.decrypt(blob, 'user-a'), plain);
  t.throws(() => ring.decrypt(blob, 'user-b'), { instanceOf: KeyRingError });
  const tampered = Buffer.from(blob);
  tampered[tampered.length - 1]! ^= 1;
  t.throws(() => ring.decrypt(tampered, 'user-a'), { instanceOf: KeyRingError });
});

test('rotation: a ring with old and new keys reads both and seals with the active one; the old key can then go', (t) => {
  const k1 = key(),
    k2 = key();
  const old = BiometricKeyRing.from({ biometricKeys: `k1:${k1}`, biometricActiveKeyId: '' });
  const blob = old.encrypt(Buffer.from('template'), 'u');
  const both = BiometricKeyRing.from({ biometricKeys: `k1:${k1},k2:${k2}`, biometricActiveKeyId: 'k2' });
  t.true(both.needsRotation(blob));
  const rotated = both.encrypt(both.decrypt(blob, 'u'), 'u');
  t.false(both.needsRotation(rotated));
  const onlyNew = BiometricKeyRing.from({ biometricKeys: `k2:${k2}`, biometricActiveKeyId: 'k2' });
  t.is(onlyNew.decrypt(rotated, 'u').toString(), 'template');
  t.throws(() => onlyNew.decrypt(blob, 'u'), { message: /no key k1/ });
});

test('bad rings are refused with a clear reason', (t) => {
  t.throws(() => BiometricKeyRing.from({ biometricKeys: 'k1:c2hvcnQ=', biometricActiveKeyId: '' }), { message: /32 bytes/ });
  t.throws(() => BiometricKeyRing.from({ biometricKeys: `k1:${key()}`, biometricActiveKeyId: 'k9' }), { message: /not in BIOMETRIC_KEYS/ });
  t.throws(() => BiometricKeyRing.from({ biometricKeys: `k1:${key()},k1:${key()}`, biometricActiveKeyId: '' }), { message: /twice/ });
  t.is(BiometricKeyRing.from({ biometricKeys: '', biometricActiveKeyId: '' }).activeKeyId, DEVELOPMENT_KEY_ID);
});

test('production refuses to start without BIOMETRIC_KEYS', (t) => {
  const err = t.throws(
    () =>
      loadConfig({
        NODE_ENV: 'production',
        JWT_PRIVATE_KEY: 'x',
        REGISTRY_URL: 'https://registry.example',
        SMS_TRANSPORT: 'webhook',
        SMS_WEBHOOK_URL: 'https://sms.example',
      }),
    { instanceOf: ConfigError },
  );
  t.regex(err!.message, /BIOMETRIC_KEYS must be set in production/);
});

test('a malformed ring stops the process at start with the reason', (t) => {
  const err = t.throws(() => loadConfig({ BIOMETRIC_KEYS: 'k1:c2hvcnQ=' }), { instanceOf: ConfigError });
  t.regex(err!.message, /key k1 must be 32 bytes/);
});
