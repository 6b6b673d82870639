/**
 * How the biometrics of a face request are sealed while they cross Redis: the image, the aligned face
 * and a search probe as values beside their jobs (./handoff.ts), and the embedding an embed job returns.
 *
 * The key that opens a hand-off is never in Redis. It is derived (HMAC-SHA256, ../crypto/key-ring.ts
 * `deriveKey`) from a key of the biometric key ring, which only the processes hold (BIOMETRIC_KEYS), and
 * a fresh per-request salt, which travels in the job payload (`resultSalt`, `alignedFaceSalt`,
 * `embeddingSalt`). So:
 * - a Redis dump (job payloads and sealed values together) opens nothing: the salt is not a key;
 * - the ring alone opens nothing either: each request's values need that request's salt;
 * - once a job hash is gone (the job finished, was withdrawn or wiped), what BullMQ or a reply list may
 *   still hold sealed with its salt cannot be opened even with the ring, because the salt is gone too.
 *
 * A sealed value names the ring key its subkey came from, so a value sealed just before a rotation
 * still opens while the ring holds that key (the ring's active key seals).
 *
 *   buffer (a Redis value):  0x02 | kid length (1 byte) | kid (UTF-8) | iv (12) | tag (16) | AES-256-GCM ciphertext
 *   SealedEmbedding (JSON, in a job result):  { kid, iv, tag, data }
 */
import { createCipheriv, createDecipheriv, randomBytes } from 'node:crypto';
import type { BiometricKeyRing } from '../keys/key-ring.js';
import { decodeEmbedding, encodeEmbedding } from '../face/embeddings.js';

export interface SealedEmbedding {
  /** The ring key the subkey was derived from. */
  kid: string;
  iv: string;
  tag: string;
  data: string;
}

/** What the subkeys are derived for: a ring key used for something else never gives the same key. */
const PURPOSE = 'faceid face-path hand-off v1';
const VERSION = 2;
const IV_BYTES = 12;
const TAG_BYTES = 16;

/** A fresh per-request salt (32 random bytes, base64): the half of a hand-off's key that travels in the job. */
export const newHandoffSalt = (): string => randomBytes(32).toString('base64');

export class HandoffSealer {
  constructor(private readonly ring: BiometricKeyRing) {}

  private key(salt: string, keyId?: string): Buffer {
    if (!salt) throw new RangeError('a hand-off needs its salt');
    return this.ring.deriveKey(PURPOSE, Buffer.from(salt, 'utf8'), keyId);
  }

  /** Bytes -> one compact buffer, for a Redis value. */
  seal(bytes: Uint8Array, salt: string): Buffer {
    const kid = Buffer.from(this.ring.activeKeyId, 'utf8');
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.key(salt), iv);
    const data = Buffer.concat([cipher.update(bytes), cipher.final()]);
    return Buffer.concat([Buffer.from([VERSION, kid.length]), kid, iv, cipher.getAuthTag(), data]);
  }

  /** Opens what `seal` sealed; throws on a wrong salt, a key the ring does not hold, or altered bytes. */
  open(sealed: Buffer, salt: string): Buffer {
    if (sealed.length < 2 || sealed[0] !== VERSION) throw new RangeError('not a sealed hand-off');
    const at = 2 + sealed[1]!;
    if (sealed.length < at + IV_BYTES + TAG_BYTES) throw new RangeError('sealed hand-off too short');
    const kid = sealed.subarray(2, at).toString('utf8');
    const decipher = createDecipheriv('aes-256-gcm', this.key(salt, kid), sealed.subarray(at, at + IV_BYTES));
    decipher.setAuthTag(sealed.subarray(at + IV_BYTES, at + IV_BYTES + TAG_BYTES));
    return Buffer.concat([decipher.update(sealed.subarray(at + IV_BYTES + TAG_BYTES)), decipher.final()]);
  }

  /** An embedding as a job result's JSON field. */
  sealEmbedding(embedding: ArrayLike<number>, salt: string): SealedEmbedding {
    const iv = randomBytes(IV_BYTES);
    const cipher = createCipheriv('aes-256-gcm', this.key(salt), iv);
    const data = Buffer.concat([cipher.update(encodeEmbedding(embedding)), cipher.final()]);
    return { kid: this.ring.activeKeyId, iv: iv.toString('base64'), tag: cipher.getAuthTag().toString('base64'), data: data.toString('base64') };
  }

  openEmbedding(sealed: SealedEmbedding, salt: string): number[] {
    const decipher = createDecipheriv('aes-256-gcm', this.key(salt, sealed.kid), Buffer.from(sealed.iv, 'base64'));
    decipher.setAuthTag(Buffer.from(sealed.tag, 'base64'));
    return Array.from(decodeEmbedding(Buffer.concat([decipher.update(Buffer.from(sealed.data, 'base64')), decipher.final()])));
  }
}
