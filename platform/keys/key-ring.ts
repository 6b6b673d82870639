/**
 * The biometric key ring: envelope-free AES-256-GCM under named keys, so that no face template (nor a
 * stored capture) is ever at rest in clear, and a key can be rotated without downtime: every blob names
 * the key that sealed it, the ring decrypts with any key it holds and encrypts with the active one; a
 * resumable job re-encrypts what an old key sealed, after which that key can be dropped.
 *
 * Blob layout (binary, stored as bytea):  0x01 | kid length (1 byte) | kid (UTF-8) | iv (12) | tag (16) | ciphertext
 * The associated data binds a blob to its subject (the user id of a canonical embedding, the case id of
 * a review capture): a blob copied onto another row does not decrypt.
 *
 * Settings: BIOMETRIC_KEYS = "kid:base64(32 bytes),kid2:..." and BIOMETRIC_ACTIVE_KEY_ID. Production
 * refuses to start without them (platform/config.ts); elsewhere an empty ring falls back to one fixed
 * development key (`dev`), which production refuses too.
 */
import { createCipheriv, createDecipheriv, createHash, createHmac, randomBytes } from 'node:crypto';

const VERSION = 1;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const KID_PATTERN = /^[A-Za-z0-9._-]{1,64}$/;

/** The development ring's one key: fixed, public, refused in production. */
export const DEVELOPMENT_KEY_ID = 'dev';
const DEVELOPMENT_KEY = createHash('sha256').update('faceid development biometric key: never in production').digest();

export class KeyRingError extends Error {}

/** Parses `kid:base64,kid:base64`; every key must be 32 bytes, every kid unique. */
export function parseKeyRing(raw: string): Map<string, Buffer> {
  const keys = new Map<string, Buffer>();
  for (const part of raw
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean)) {
    const at = part.indexOf(':');
    const kid = part.slice(0, at),
      b64 = part.slice(at + 1);
    if (at < 1 || !KID_PATTERN.test(kid))
      throw new KeyRingError(`BIOMETRIC_KEYS: "${kid || part.slice(0, 8)}…" is not kid:base64 (kid: letters, digits, . _ -)`);
    const key = Buffer.from(b64, 'base64');
    if (key.length !== 32) throw new KeyRingError(`BIOMETRIC_KEYS: key ${kid} must be 32 bytes of base64 (got ${key.length})`);
    if (keys.has(kid)) throw new KeyRingError(`BIOMETRIC_KEYS: key id ${kid} appears twice`);
    keys.set(kid, key);
  }
  return keys;
}

export class BiometricKeyRing {
  private constructor(
    private readonly keys: ReadonlyMap<string, Buffer>,
    readonly activeKeyId: string,
  ) {}

  /** From the settings; an empty ring is the development key (the config refuses that in production). */
  static from(settings: { biometricKeys: string; biometricActiveKeyId: string }): BiometricKeyRing {
    const keys = parseKeyRing(settings.biometricKeys);
    if (keys.size === 0) return new BiometricKeyRing(new Map([[DEVELOPMENT_KEY_ID, DEVELOPMENT_KEY]]), DEVELOPMENT_KEY_ID);
    const active = settings.biometricActiveKeyId || [...keys.keys()].at(-1)!;
    if (!keys.has(active)) throw new KeyRingError(`BIOMETRIC_ACTIVE_KEY_ID ${active} is not in BIOMETRIC_KEYS`);
    return new BiometricKeyRing(keys, active);
  }

  get keyIds(): string[] {
    return [...this.keys.keys()];
  }

  encrypt(plaintext: Uint8Array, associatedData: string): Buffer {
    const key = this.keys.get(this.activeKeyId)!;
    const kid = Buffer.from(this.activeKeyId, 'utf8');
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', key, iv);
    cipher.setAAD(Buffer.from(associatedData, 'utf8'));
    const data = Buffer.concat([cipher.update(plaintext), cipher.final()]);
    return Buffer.concat([Buffer.from([VERSION, kid.length]), kid, iv, cipher.getAuthTag(), data]);
  }

  /** Throws KeyRingError for a blob of an unknown key, a tampered blob, or one bound to another subject. */
  decrypt(blob: Uint8Array, associatedData: string): Buffer {
    const b = Buffer.from(blob.buffer, blob.byteOffset, blob.byteLength);
    const kid = BiometricKeyRing.keyIdOf(b);
    const key = this.keys.get(kid);
    if (!key) throw new KeyRingError(`no key ${kid} in the ring (was it dropped before every blob was re-encrypted?)`);
    const at = 2 + b[1]!;
    const iv = b.subarray(at, at + IV_BYTES);
    const tag = b.subarray(at + IV_BYTES, at + IV_BYTES + TAG_BYTES);
    const decipher = createDecipheriv('aes-256-gcm', key, iv);
    decipher.setAAD(Buffer.from(associatedData, 'utf8'));
    decipher.setAuthTag(tag);
    try {
      return Buffer.concat([decipher.update(b.subarray(at + IV_BYTES + TAG_BYTES)), decipher.final()]);
    } catch {
      throw new KeyRingError('biometric blob does not authenticate (tampered, or bound to another subject)');
    }
  }

  /**
   * The keys' bytes by id, for this process's own worker threads (handed over in memory as workerData,
   * e.g. to decrypt a snapshot on several cores): never to be logged, stored or sent anywhere.
   */
  keysForThreads(): Record<string, Uint8Array> {
    return Object.fromEntries([...this.keys].map(([kid, key]) => [kid, new Uint8Array(key)]));
  }

  /** The key id a blob names (without decrypting it). */
  static keyIdOf(blob: Uint8Array): string {
    if (blob.length < 2 + 1 + IV_BYTES + TAG_BYTES || blob[0] !== VERSION) throw new KeyRingError('not a biometric blob');
    return Buffer.from(blob.subarray(2, 2 + blob[1]!)).toString('utf8');
  }

  /**
   * A 256-bit subkey of one ring key for one purpose and one salt: HMAC-SHA256(key, purpose ‖ 0x00 ‖ salt).
   * For values whose salt travels apart from them (platform/face-path/sealing.ts): neither the salt
   * alone nor the ring key alone gives the subkey. Throws KeyRingError for a key the ring does not hold.
   */
  deriveKey(purpose: string, salt: Uint8Array, keyId: string = this.activeKeyId): Buffer {
    const key = this.keys.get(keyId);
    if (!key) throw new KeyRingError(`no key ${keyId} in the ring (was it dropped before every blob was re-encrypted?)`);
    return createHmac('sha256', key)
      .update(purpose, 'utf8')
      .update(Buffer.from([0]))
      .update(salt)
      .digest();
  }

  /** Whether a blob was sealed by another key than the active one (a rotation has work to do). */
  needsRotation(blob: Uint8Array): boolean {
    return BiometricKeyRing.keyIdOf(blob) !== this.activeKeyId;
  }
}
