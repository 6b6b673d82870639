/** The biometric key ring: sealing bound to its subject, rotation, and the settings production refuses. */
import test from 'ava';
import { randomBytes } from 'node:crypto';
import { KeyRing, KeyRingError, DEVELOPMENT_KEY_ID } from '../platform/keys/key-ring.js';
import { loadConfig, ConfigError } from '../processes/config.js';

const key = () => randomBytes(32).toString('base64');

test('a sealed template decrypts only with its subject as associated data, and is not the plaintext', (t) => {
  const ring = KeyRing.from({ biometricKeys: `k1:${key()}`, biometricActiveKeyId: 'k1' });
  const plain = Buffer.from(new Float32Array([0.5, -0.25, 0.125]).buffer);
  const blob = ring.seal('templates', plain, 'user-a');
  t.false(blob.includes(plain));
  t.is(KeyRing.keyIdOf(blob), 'k1');
  t.deepEqual(ring.open('templates', blob, 'user-a'), plain);
  t.throws(() => ring.open('templates', blob, 'user-b'), { instanceOf: KeyRingError });
  const tampered = Buffer.from(blob);
  tampered[tampered.length - 1]! ^= 1;
  t.throws(() => ring.open('templates', tampered, 'user-a'), { instanceOf: KeyRingError });
});

test('rotation: a ring with old and new keys reads both and seals with the active one; the old key can then go', (t) => {
  const k1 = key(),
    k2 = key();
  const old = KeyRing.from({ biometricKeys: `k1:${k1}`, biometricActiveKeyId: '' });
  const blob = old.seal('templates', Buffer.from('template'), 'u');
  const both = KeyRing.from({ biometricKeys: `k1:${k1},k2:${k2}`, biometricActiveKeyId: 'k2' });
  t.true(both.needsRotation(blob));
  const rotated = both.seal('templates', both.open('templates', blob, 'u'), 'u');
  t.false(both.needsRotation(rotated));
  const onlyNew = KeyRing.from({ biometricKeys: `k2:${k2}`, biometricActiveKeyId: 'k2' });
  t.is(onlyNew.open('templates', rotated, 'u').toString(), 'template');
  t.throws(() => onlyNew.open('templates', blob, 'u'), { message: /no key k1/ });
});

test('bad rings are refused with a clear reason', (t) => {
  t.throws(() => KeyRing.from({ biometricKeys: 'k1:c2hvcnQ=', biometricActiveKeyId: '' }), { message: /32 bytes/ });
  t.throws(() => KeyRing.from({ biometricKeys: `k1:${key()}`, biometricActiveKeyId: 'k9' }), { message: /not in BIOMETRIC_KEYS/ });
  t.throws(() => KeyRing.from({ biometricKeys: `k1:${key()},k1:${key()}`, biometricActiveKeyId: '' }), { message: /twice/ });
  t.is(KeyRing.from({ biometricKeys: '', biometricActiveKeyId: '' }).activeKeyId, DEVELOPMENT_KEY_ID);
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
